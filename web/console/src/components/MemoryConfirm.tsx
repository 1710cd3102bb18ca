// A modal question answered with the keyboard: the native <dialog> (focus
// kept inside, Escape cancels), opened with the focus on Cancel.
import { useEffect, useId, useRef, type ReactNode } from "react";

export function MemoryConfirm({ open, title, children, confirmLabel, busy, error, onConfirm, onCancel }: {
  open: boolean;
  title: string;
  children: ReactNode;
  confirmLabel: string;
  busy: boolean;
  error: string;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const cancel = useRef<HTMLButtonElement>(null);
  const titleId = useId();
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (open && !d.open) {
      d.showModal();
      cancel.current?.focus();
    } else if (!open && d.open) d.close();
  }, [open]);
  return (
    <dialog
      ref={ref}
      className="mem-dialog"
      aria-labelledby={titleId}
      data-testid="memory-confirm"
      onCancel={(e) => {
        e.preventDefault();
        if (!busy) onCancel();
      }}
    >
      <h2 id={titleId}>{title}</h2>
      <div>{children}</div>
      {error && <p className="error" role="alert">{error}</p>}
      <div className="mem-dialog-actions">
        <button type="button" ref={cancel} className="secondary" onClick={onCancel} disabled={busy}>Cancel</button>
        <button type="button" className="danger" data-action="confirm" onClick={onConfirm} disabled={busy}>{busy ? "Working…" : confirmLabel}</button>
      </div>
    </dialog>
  );
}
