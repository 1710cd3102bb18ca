// PLACEHOLDER on the console-pages branch: the Patterns page's helper replaces
// this file. It must never reach main.
export default function PatternsPage({ path }: { path: string }) {
  return <p>Patterns: {path}</p>;
}
