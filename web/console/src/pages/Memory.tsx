// PLACEHOLDER on the console-pages branch: the Memory page's helper replaces
// this file. It must never reach main.
export default function MemoryPage({ path }: { path: string }) {
  return <p>Memory: {path}</p>;
}
