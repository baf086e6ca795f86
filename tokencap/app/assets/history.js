(function () {
  // Browser Back / Forward between two views of the Rollout page (J, K, another rollout) change the query
  // string alone, and Streamlit reruns a page on Back only when the page itself changes: the URL would name
  // one rollout while the page shows another. Reload then, so the page shows the view its URL names.
  const page = location.pathname.replace(/\/+$/, '');
  window.__tokencapShown = page;
  if (window.__tokencapHistory) return;
  window.__tokencapHistory = true;
  window.addEventListener('popstate', function () {
    const now = location.pathname.replace(/\/+$/, '');
    if (now.endsWith('/rollout') && window.__tokencapShown && window.__tokencapShown.endsWith('/rollout')) {
      location.reload();
    }
  });
})();
