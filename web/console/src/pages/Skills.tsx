// PLACEHOLDER on the console-pages branch: the Skills page's helper replaces
// this file. It must never reach main.
export default function SkillsPage({ path }: { path: string }) {
  return <p>Skills: {path}</p>;
}
