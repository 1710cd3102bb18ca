// The ECharts side of OptionChart: the chart types and components the
// console's pages use (tree-shaken echarts/core), drawn on a canvas that
// follows its element's size.
import { useEffect, useRef } from "react";
import * as echarts from "echarts/core";
import { BarChart, CustomChart, LineChart, PieChart, ScatterChart } from "echarts/charts";
import { DataZoomComponent, GridComponent, LegendComponent, MarkLineComponent, TooltipComponent } from "echarts/components";
import { CanvasRenderer } from "echarts/renderers";

echarts.use([BarChart, LineChart, PieChart, ScatterChart, CustomChart, GridComponent, LegendComponent, TooltipComponent, DataZoomComponent, MarkLineComponent, CanvasRenderer]);

export type ChartOption = echarts.EChartsCoreOption;

// ChartClick is the data item a click hit.
export interface ChartClick {
  seriesIndex: number;
  dataIndex: number;
  name: string;
}

export default function OptionChartCore({ option, label, testId, height, onClick }: { option: ChartOption; label: string; testId?: string | undefined; height?: number | undefined; onClick?: ((c: ChartClick) => void) | undefined }) {
  const el = useRef<HTMLDivElement>(null);
  const chart = useRef<echarts.ECharts | null>(null);
  const click = useRef(onClick);
  click.current = onClick;
  useEffect(() => {
    const node = el.current;
    if (!node) return undefined;
    const c = echarts.init(node, undefined, { renderer: "canvas" });
    chart.current = c;
    c.on("click", (p) => {
      const e = p as { seriesIndex?: number; dataIndex?: number; name?: string };
      if (typeof e.dataIndex === "number") click.current?.({ seriesIndex: e.seriesIndex ?? 0, dataIndex: e.dataIndex, name: e.name ?? "" });
    });
    const ro = new ResizeObserver(() => c.resize());
    ro.observe(node);
    return () => {
      ro.disconnect();
      c.dispose();
      chart.current = null;
    };
  }, []);
  useEffect(() => {
    chart.current?.setOption(option, { notMerge: true });
  }, [option]);
  // The height is set through the CSSOM (allowed by the CSP), not a style
  // attribute.
  useEffect(() => {
    if (el.current && height) el.current.style.height = height + "px";
  }, [height]);
  return <div ref={el} className={onClick ? "chart clickable" : "chart"} data-testid={testId} role="img" aria-label={label} />;
}
