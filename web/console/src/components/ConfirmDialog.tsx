// A confirmation as a modal <dialog>, the same on every page: the browser
// keeps the focus inside it, Escape cancels, Cancel comes first and Tab
// reaches the action. With a field inside (a reason), the focus starts on
// the field and Enter there confirms; without one it starts on Cancel, so
// a stray Enter confirms nothing.
import { useEffect, useId, useRef, type ReactNode } from "react";

export function ConfirmDialog({ open, title, children, confirmLabel, busy = false, error = "", onConfirm, onCancel, focusField = false, testId }: {
  open: boolean;
  title: string;
  children?: ReactNode;
  confirmLabel: string;
  busy?: boolean;
  error?: string;
  onConfirm: () => void;
  onCancel: () => void;
  // focusField starts the focus on the dialog's first field instead of
  // Cancel.
  focusField?: boolean;
  testId?: string;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const cancelRef = useRef<HTMLButtonElement>(null);
  const titleId = useId();
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (open && !d.open) {
      d.showModal();
      const field = focusField ? d.querySelector<HTMLElement>("input, textarea, select") : null;
      (field ?? cancelRef.current)?.focus();
    }
    if (!open && d.open) d.close();
  }, [open, focusField]);
  return (
    <dialog
      ref={ref}
      className="confirm-dialog"
      aria-labelledby={titleId}
      data-testid={testId}
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
        <div className="confirm-actions">
          <button type="button" className="secondary" disabled={busy} onClick={onCancel} ref={cancelRef}>Cancel</button>
          <button type="submit" className="danger" disabled={busy} data-testid="confirm">{busy ? "Working…" : confirmLabel}</button>
        </div>
      </form>
    </dialog>
  );
}
