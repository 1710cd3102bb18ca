// A confirmation as a modal <dialog>: the browser keeps the focus inside
// it, Escape cancels, and its buttons answer with Enter or Space.
import { useEffect, useId, useRef, type ReactNode } from "react";

// With safeFocus, the focus starts on Cancel (an Enter cannot confirm by
// accident); otherwise on the dialog's first field or button.
export function ConfirmDialog({ open, title, children, confirmLabel, busy, error, onConfirm, onCancel, safeFocus = false }: {
  open: boolean;
  safeFocus?: boolean;
  title: string;
  children?: ReactNode;
  confirmLabel: string;
  busy: boolean;
  error: string;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const cancelRef = useRef<HTMLButtonElement>(null);
  const titleId = useId();
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (open && !d.open) {
      d.showModal();
      if (safeFocus) cancelRef.current?.focus();
    }
    if (!open && d.open) d.close();
  }, [open, safeFocus]);
  return (
    <dialog
      ref={ref}
      className="pat-dialog"
      aria-labelledby={titleId}
      onCancel={(e) => {
        e.preventDefault();
        if (!busy) onCancel();
      }}
    >
      <form
        method="dialog"
        onSubmit={(e) => {
          e.preventDefault();
          if (!busy) onConfirm();
        }}
      >
        <h2 id={titleId}>{title}</h2>
        {children}
        {error && <p className="error" role="alert">{error}</p>}
        <div className="pat-actions">
          <button type="submit" className="danger" disabled={busy} data-testid="confirm">{busy ? "Working…" : confirmLabel}</button>
          <button type="button" className="secondary" disabled={busy} onClick={onCancel} ref={cancelRef}>Cancel</button>
        </div>
      </form>
    </dialog>
  );
}
