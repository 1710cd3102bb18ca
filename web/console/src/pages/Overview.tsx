// PLACEHOLDER on the console-pages branch: the Overview page's helper replaces
// this file. It must never reach main.
export default function OverviewPage({ path }: { path: string }) {
  return <p>Overview: {path}</p>;
}
