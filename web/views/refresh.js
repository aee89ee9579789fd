// refresh.js: pages that refresh by themselves poll with this: every period while the
// tab is visible, never two polls at once, and a redraw keeps the keyboard focus on
// the control that had it (by its data-focus key), so a keyboard user is not thrown
// back to the top every few seconds.

export function poll(fn, periodMs) {
  let timer = null;
  let stopped = false;
  let running = false;
  const tick = async () => {
    timer = null;
    if (stopped) return;
    if (!document.hidden && !running) {
      running = true;
      try {
        await fn();
      } finally {
        running = false;
      }
    }
    if (!stopped) timer = setTimeout(tick, periodMs);
  };
  timer = setTimeout(tick, periodMs);
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
  };
}

// Replace container's children with nodes, keeping the focus on the element with the
// same data-focus key as the one focused before.
export function redraw(container, ...nodes) {
  const active = document.activeElement;
  const key = active && container.contains(active) ? active.getAttribute('data-focus') : null;
  container.replaceChildren(...nodes);
  if (key) {
    const again = container.querySelector(`[data-focus="${CSS.escape(key)}"]`);
    if (again) again.focus();
  }
}
