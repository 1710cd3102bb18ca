// A small router over the History API: the console lives under /console/
// and the gateway answers every client route with index.html.
import { useSyncExternalStore } from "react";

export const BASE = "/console";

function subscribe(cb: () => void): () => void {
  window.addEventListener("popstate", cb);
  return () => window.removeEventListener("popstate", cb);
}

export function usePath(): string {
  return useSyncExternalStore(subscribe, () => {
    const p = location.pathname;
    return p.startsWith(BASE) ? p.slice(BASE.length) || "/" : "/";
  });
}

export function navigate(path: string, replace = false): void {
  const url = BASE + path;
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  window.dispatchEvent(new PopStateEvent("popstate"));
}

// linkProps makes an <a> navigate inside the app (plain clicks only).
export function linkProps(path: string): { href: string; onClick: (e: React.MouseEvent) => void } {
  return {
    href: BASE + path,
    onClick: (e) => {
      if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
      e.preventDefault();
      navigate(path);
    },
  };
}
