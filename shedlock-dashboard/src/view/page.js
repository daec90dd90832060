(function () {
  const loaded = Date.now();
  const show = (ms) => {
    if (ms <= 0) return "ended";
    const s = Math.floor(ms / 1000);
    return s >= 60 ? Math.floor(s / 60) + "m " + (s % 60) + "s" : s + "s";
  };
  const tick = () => {
    for (const cell of document.querySelectorAll("[data-remaining-ms]")) {
      cell.textContent = show(Number(cell.dataset.remainingMs) - (Date.now() - loaded));
    }
  };
  tick();
  setInterval(tick, 1000);
  const reload = () => {
    const active = document.activeElement;
    if (active && (active.tagName === "INPUT" || active.tagName === "BUTTON")) {
      setTimeout(reload, 1000);
    } else {
      location.reload();
    }
  };
  setTimeout(reload, Number(document.body.dataset.refreshMs));
})();
