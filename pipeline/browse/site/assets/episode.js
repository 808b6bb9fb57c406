// An episode page: a click on a word or a segment plays from there; while the audio plays, the segment being
// said is highlighted and kept in view; #t=SECONDS opens at that moment; the flagged segments can be shown alone.
(function () {
  "use strict";
  var player = document.getElementById("player");
  var transcript = document.getElementById("transcript");
  var segs = Array.prototype.slice.call(document.querySelectorAll("p.seg"));
  var starts = segs.map(function (p) { return parseFloat(p.getAttribute("data-t")); });
  var header = document.querySelector("header");
  var current = null;
  var readerScrolledAt = 0;
  var smooth = !window.matchMedia("(prefers-reduced-motion: reduce)").matches;

  function segmentAt(t) {
    // the last segment that starts at or before t
    var lo = 0, hi = starts.length - 1, found = -1;
    while (lo <= hi) {
      var mid = (lo + hi) >> 1;
      if (starts[mid] <= t + 0.005) { found = mid; lo = mid + 1; } else { hi = mid - 1; }
    }
    return found;
  }

  function keepInView(el, always) {
    if (!always && Date.now() - readerScrolledAt < 4000) return; // the reader scrolled away: let them read
    var r = el.getBoundingClientRect();
    var top = header && getComputedStyle(header).position === "sticky" ? header.getBoundingClientRect().bottom : 0;
    if (r.top < top || r.bottom > window.innerHeight) {
      // to the middle of what the sticky header leaves visible
      var room = window.innerHeight - top;
      window.scrollBy({ top: r.top - top - Math.max(0, (room - r.height) / 2), behavior: smooth && !always ? "smooth" : "auto" });
    }
  }

  function highlight(t, scroll, always) {
    var i = segmentAt(t);
    var seg = i >= 0 ? segs[i] : null;
    if (seg !== current) {
      if (current) { current.classList.remove("now"); current.removeAttribute("aria-current"); }
      current = seg;
      if (seg) { seg.classList.add("now"); seg.setAttribute("aria-current", "true"); }
    }
    if (seg && scroll) keepInView(seg, always);
  }

  function seek(t, play) {
    highlight(t, true, true);
    if (!player) return;
    var go = function () {
      player.currentTime = t;
      if (play) {
        var started = player.play();
        if (started && started.catch) started.catch(function () {}); // a browser that wants a click first
      }
    };
    if (player.readyState > 0) go();
    else player.addEventListener("loadedmetadata", go, { once: true });
  }

  function fromHash(play) {
    var m = /^#t=([0-9]+(?:\.[0-9]+)?)$/.exec(location.hash);
    if (m) seek(parseFloat(m[1]), play);
  }

  if (transcript) {
    transcript.addEventListener("click", function (ev) {
      if (String(window.getSelection && window.getSelection()) !== "") return; // selecting text, not playing
      var el = ev.target.closest("[data-t]");
      if (!el || !transcript.contains(el)) return;
      var at = ev.target.closest("a.at");
      if (at) ev.preventDefault();
      var t = parseFloat(el.getAttribute("data-t"));
      history.replaceState(null, "", "#t=" + t.toFixed(2));
      seek(t, true);
    });
  }
  if (player) {
    player.addEventListener("timeupdate", function () { highlight(player.currentTime, !player.paused, false); });
    player.addEventListener("seeked", function () { highlight(player.currentTime, false, false); });
  }
  ["wheel", "touchmove"].forEach(function (name) {
    window.addEventListener(name, function () { readerScrolledAt = Date.now(); }, { passive: true });
  });
  window.addEventListener("keydown", function (ev) {
    if (/^(PageUp|PageDown|ArrowUp|ArrowDown|Home|End)$/.test(ev.key)) readerScrolledAt = Date.now();
    // space plays and pauses, when no control has the focus
    if (ev.key === " " && player && (ev.target === document.body || ev.target === transcript)) {
      ev.preventDefault();
      if (player.paused) player.play().catch(function () {}); else player.pause();
    }
  });
  var only = document.getElementById("only-flagged");
  if (only) {
    only.addEventListener("change", function () { document.body.classList.toggle("only-flagged", only.checked); });
  }
  window.addEventListener("hashchange", function () { fromHash(true); });
  fromHash(false);
})();
