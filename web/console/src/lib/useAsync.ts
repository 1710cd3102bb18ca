// useAsync runs load when deps change and keeps its state; an older load
// that finishes after a newer one started is ignored, and the load's
// AbortSignal fires when it is superseded or the component goes.
import { useCallback, useEffect, useRef, useState } from "react";

export type AsyncState<T> =
  | { status: "loading"; data?: T | undefined; error?: undefined }
  | { status: "ready"; data: T; error?: undefined }
  | { status: "error"; data?: T | undefined; error: unknown };

export function useAsync<T>(load: (signal: AbortSignal) => Promise<T>, deps: readonly unknown[]): AsyncState<T> & { reload: () => void } {
  const [state, setState] = useState<AsyncState<T>>({ status: "loading" });
  const [tick, setTick] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  useEffect(() => {
    const ac = new AbortController();
    setState((s) => ({ status: "loading", data: s.data }));
    loadRef.current(ac.signal).then(
      (data) => {
        if (!ac.signal.aborted) setState({ status: "ready", data });
      },
      (error: unknown) => {
        if (!ac.signal.aborted) setState((s) => ({ status: "error", data: s.data, error }));
      },
    );
    return () => ac.abort();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { ...state, reload };
}
