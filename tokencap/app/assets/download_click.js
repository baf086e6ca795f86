/* $NONCE */
(function () {
  // Starts the download of a file just prepared: a click on its link (the page's own media URL).
  const link = document.querySelector('a.tc-download[href="$HREF"]');
  if (link) link.click();
})();
