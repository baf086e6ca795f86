/* $NONCE */
(function () {
  // The detail is brought into view once the page above it has its final height: a click redraws the call
  // tree under a new key, and its new chart takes its height a few frames after this script first runs
  // (later on a busy machine), pushing the detail back down. So the check repeats each frame until the tree
  // is drawn and the detail's place has held for 10 frames (at most ~5 s), and stops at once if the reader
  // scrolls, clicks or types meanwhile.
  const html = document.documentElement, events = ['wheel', 'touchstart', 'keydown', 'mousedown'];
  let frames = 0, still = 0, last = null, reader = false;
  const took = () => { reader = true; };
  events.forEach(e => window.addEventListener(e, took, {capture: true, passive: true}));
  function step() {
    const el = document.querySelector('.st-key-detail');
    const tree = document.querySelector('[class*="st-key-tree-"] svg.marks, [class*="st-key-tree-"] canvas');
    frames += 1;
    if (el && !reader) {
      let top = el.getBoundingClientRect().top;
      if (top > innerHeight * 0.6 || top < 0) { el.scrollIntoView({block: 'start'}); top = el.getBoundingClientRect().top; }
      still = tree && last !== null && Math.abs(top - last) < 1 ? still + 1 : 0;
      last = top;
    }
    if (reader || !el || still >= 10 || frames > 300) {
      events.forEach(e => window.removeEventListener(e, took, {capture: true}));
      // The page is where it will stay: what a pointer aims at now is what it will hit.
      html.dataset.detailScroll = "$NONCE";
      return;
    }
    requestAnimationFrame(step);
  }
  step();
})();
