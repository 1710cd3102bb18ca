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

export default function OptionChartCore({ option, label, testId, height }: { option: ChartOption; label: string; testId?: string | undefined; height?: number | undefined }) {
  const el = useRef<HTMLDivElement>(null);
  const chart = useRef<echarts.ECharts | null>(null);
  useEffect(() => {
    const node = el.current;
    if (!node) return undefined;
    const c = echarts.init(node, undefined, { renderer: "canvas" });
    chart.current = c;
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
  return <div ref={el} className="chart" data-testid={testId} role="img" aria-label={label} />;
}
