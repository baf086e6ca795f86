(function (n) {
  // Back on the run from a rollout opened from its table: the page scrolls to the table, the table's grid to
  // the row, retrying while the grid is not drawn yet (n tries, 100 ms apart).
  const go = () => {
    const box = document.querySelector('.st-key-run_table_box');
    const grid = box && box.querySelector('.dvn-scroller');
    if (!grid) return n-- > 0 && setTimeout(go, 100);
    box.scrollIntoView({block: 'center'});
    grid.scrollTop = $TOP;
  };
  go();
})(50);
