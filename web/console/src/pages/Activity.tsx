// PLACEHOLDER on the console-pages branch: the Activity page's helper replaces
// this file. It must never reach main.
export default function ActivityPage({ path }: { path: string }) {
  return <p>Activity: {path}</p>;
}
