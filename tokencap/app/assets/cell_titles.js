(function () {
  if (window.__tokencapCellTitles) return;
  window.__tokencapCellTitles = true;
  const {COLUMNS, MARKERS, PAD} = $SETTINGS, ROW = 35;
  const ruler = document.createElement('canvas').getContext('2d');
  ruler.font = '14px "Source Sans", sans-serif';
  const columnAt = (x, scrollLeft, marker) => {
    let left = marker;
    for (let i = 0; i < COLUMNS.length; i++) {
      const c = COLUMNS[i];
      const at = c.pinned ? x : x + scrollLeft;
      if (at >= left && at < left + c.w) return i;
      left += c.w;
    }
    return -1;
  };
  document.addEventListener('mousemove', (e) => {
    const grid = e.target.closest && e.target.closest('.st-key-run_table_box [data-testid="stDataFrame"]');
    if (!grid) return;
    const table = grid.querySelector('table[role="grid"]');
    const scroller = grid.querySelector('.dvn-scroller');
    const canvas = grid.querySelector('canvas[data-testid="data-grid-canvas"]');
    if (!table || !scroller || !canvas) return;
    const rows = Number(table.getAttribute('aria-rowcount')) - 1;
    const marker = MARKERS.find(([n]) => rows > n)[1];
    const box = canvas.getBoundingClientRect();
    const x = e.clientX - box.left, y = e.clientY - box.top;
    const col = columnAt(x, scroller.scrollLeft, marker);
    const row = y < ROW ? -1 : Math.floor((y - ROW + scroller.scrollTop) / ROW);
    let title = '';
    if (col >= 0 && row >= 0 && COLUMNS[col].text) {
      const cell = table.querySelector('#glide-cell-' + (col + 1) + '-' + row);
      const text = cell ? cell.textContent : '';
      if (text && ruler.measureText(text).width > COLUMNS[col].w - 2 * PAD) title = text;
    }
    if (grid.getAttribute('title') !== title) grid.setAttribute('title', title);  // the hovered grid's tooltip
  }, {passive: true});
})();
