// An entity's neighbourhood drawn by Cytoscape.js, loaded by dynamic import
// the first time a graph is shown (its own chunk). Nodes are coloured by
// entity type, edges labelled by relation; tapping a node calls onSelect.
// The container carries data-nodes, data-edges and data-center once drawn.
//
// The console's CSP refuses inline <style> elements: Cytoscape adds one
// (id __________cytoscape_stylesheet, "position: relative" for its
// containers) unless an element of that id exists, so a placeholder of
// that id is put in first and Memory.css gives the container its position.
// Cytoscape's own sizing goes through the CSSOM, which the CSP allows.
import { useEffect, useRef, useState } from "react";
import type { Core, ElementDefinition, StylesheetJson } from "cytoscape";
import { ringPositions, type GraphElements } from "../lib/memory.ts";

const STYLESHEET_ID = "__________cytoscape_stylesheet";

function claimStylesheet(): void {
  if (document.getElementById(STYLESHEET_ID)) return;
  const el = document.createElement("meta");
  el.id = STYLESHEET_ID;
  el.name = "cytoscape-stylesheet";
  el.content = "in Memory.css";
  document.head.appendChild(el);
}

const STYLE: StylesheetJson = [
  {
    selector: "node",
    style: {
      "background-color": "data(color)", label: "data(label)", "font-size": 11, color: "#1d2330",
      "text-valign": "bottom", "text-margin-y": 4, "border-width": 1, "border-color": "#8a93a6", width: 26, height: 26,
      "text-wrap": "ellipsis", "text-max-width": "140px",
    },
  },
  { selector: "node[?center]", style: { "border-width": 3, "border-color": "#2f6fde", width: 36, height: 36, "font-weight": "bold" } },
  {
    selector: "edge",
    style: {
      width: 1.5, "line-color": "#a3acbd", "target-arrow-color": "#a3acbd", "target-arrow-shape": "triangle", "curve-style": "bezier",
      label: "data(label)", "font-size": 9, color: "#475067", "text-rotation": "autorotate", "text-background-color": "#ffffff",
      "text-background-opacity": 0.85, "text-background-padding": "1px",
    },
  },
];

export default function MemoryGraph({ elements, centerId, onSelect, label }: {
  elements: GraphElements;
  centerId: string;
  onSelect: (id: string) => void;
  label: string;
}) {
  const box = useRef<HTMLDivElement>(null);
  const select = useRef(onSelect);
  select.current = onSelect;
  const [error, setError] = useState("");
  useEffect(() => {
    let cy: Core | undefined;
    let gone = false;
    const el = box.current;
    if (!el) return;
    el.removeAttribute("data-nodes");
    el.removeAttribute("data-edges");
    import("cytoscape").then(
      ({ default: cytoscape }) => {
        if (gone) return;
        claimStylesheet();
        const els: ElementDefinition[] = [...elements.nodes, ...elements.edges];
        const start = ringPositions(elements);
        cy = cytoscape({
          container: el, elements: els, style: STYLE, minZoom: 0.3, maxZoom: 3, boxSelectionEnabled: false,
          layout: { name: "preset", positions: start, fit: false },
        });
        // A force-directed layout from the rings settles the drawing.
        cy.layout({
          name: "cose", randomize: false, animate: false, fit: true, padding: 30,
          idealEdgeLength: () => 110, nodeRepulsion: () => 400000, nodeDimensionsIncludeLabels: true,
        }).run();
        cy.on("tap", "node", (e) => {
          const id = String(e.target.id());
          if (id !== centerId) select.current(id);
        });
        // For scripts (the browser test clicks a node where it is drawn):
        // the instance as a property of the container, not an attribute.
        Object.defineProperty(el, "cytoscape", { value: cy, configurable: true });
        el.dataset.nodes = String(cy.nodes().length);
        el.dataset.edges = String(cy.edges().length);
        el.dataset.center = centerId;
      },
      (e: unknown) => {
        if (!gone) setError(e instanceof Error ? e.message : String(e));
      },
    );
    return () => {
      gone = true;
      cy?.destroy();
    };
  }, [elements, centerId]);
  return (
    <>
      <div ref={box} className="mem-graph" role="img" aria-label={label} data-testid="memory-graph" />
      {error && <p className="error" role="alert">The graph could not be drawn: {error}</p>}
    </>
  );
}
