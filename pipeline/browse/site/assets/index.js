// The index page: the episodes' table sorted by any column (its header buttons), and the archive's search
// (search.js) with its hits linked to the moment on the episode's page. #q=... in the address searches at once.
(function () {
  "use strict";
  var podscribe = window.podscribe;
  var catalog = JSON.parse(document.getElementById("catalog").textContent);
  var PAGE = 30;

  // -- the table -------------------------------------------------------------------------------------------
  var table = document.getElementById("episodes");
  var body = table.tBodies[0];
  Array.prototype.forEach.call(table.tHead.querySelectorAll("button"), function (button, column) {
    button.addEventListener("click", function () {
      var th = button.parentNode;
      var descending = th.getAttribute("aria-sort") === "ascending";
      Array.prototype.forEach.call(table.tHead.querySelectorAll("th"), function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", descending ? "descending" : "ascending");
      var number = button.getAttribute("data-kind") === "number";
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[column].getAttribute("data-v"), y = b.cells[column].getAttribute("data-v");
        var c = number ? parseFloat(x) - parseFloat(y) : x < y ? -1 : x > y ? 1 : 0;
        return descending ? -c : c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });

  // -- the search ------------------------------------------------------------------------------------------
  var input = document.getElementById("q");
  var status = document.getElementById("search-status");
  var list = document.getElementById("hits");
  var more = document.getElementById("more-hits");
  var generation = 0;
  var found = [];
  var shown = 0;

  function clock(hundredths) {
    var s = Math.floor(hundredths / 100), h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    return h + ":" + (m < 10 ? "0" : "") + m + ":" + (s % 60 < 10 ? "0" : "") + (s % 60);
  }

  function marked(text, marks) {
    // the segment's text as nodes, the words at the marked positions in <mark>
    var words = podscribe.tokens(text), frag = document.createDocumentFragment(), at = 0;
    var spans = [];
    marks.forEach(function (m) {
      if (m[0] < words.length) spans.push([words[m[0]][1], words[Math.min(m[1], words.length) - 1][2]]);
    });
    spans.sort(function (a, b) { return a[0] - b[0]; });
    spans.forEach(function (s) {
      if (s[0] < at) { if (s[1] <= at) return; s = [at, s[1]]; }
      frag.appendChild(document.createTextNode(text.slice(at, s[0])));
      var mark = document.createElement("mark");
      mark.textContent = text.slice(s[0], s[1]);
      frag.appendChild(mark);
      at = s[1];
    });
    frag.appendChild(document.createTextNode(text.slice(at)));
    return frag;
  }

  function render(hit, row) {
    var episode = catalog.episodes[hit.episode];
    var li = document.createElement("li");
    var where = document.createElement("div");
    where.className = "where";
    var link = document.createElement("a");
    var seconds = (row[0] / 100).toFixed(2);
    link.href = episode.page + "#t=" + seconds;
    link.textContent = episode.title;
    where.appendChild(link);
    var about = " · " + clock(row[0]) + (row[1] >= 0 ? " · " + episode.speakers[row[1]] : "");
    if (episode.date) about = " · " + episode.date.slice(0, 10) + about;
    where.appendChild(document.createTextNode(about));
    var said = document.createElement("p");
    said.appendChild(marked(row[2], hit.marks));
    li.appendChild(where);
    li.appendChild(said);
    return li;
  }

  function showMore(mine) {
    var next = found.slice(shown, shown + PAGE);
    shown += next.length;
    var texts = {};
    next.forEach(function (h) { texts[h.episode] = 1; });
    return Promise.all(Object.keys(texts).map(podscribe.text)).then(function () {
      if (mine !== generation) return;
      next.forEach(function (hit) {
        var rows = podscribe.data["t/" + hit.episode];
        list.appendChild(render(hit, rows[hit.segment]));
      });
      if (next.length && !podscribe.firstHitAt) podscribe.firstHitAt = performance.now();
      more.hidden = shown >= found.length;
    });
  }

  function say(text) { status.textContent = text; }

  function count(done) {
    var episodes = {};
    found.forEach(function (h) { episodes[h.episode] = 1; });
    var n = Object.keys(episodes).length;
    if (!found.length) return done ? "No segment says that." : "Searching\u2026";
    return found.length + " segment" + (found.length > 1 ? "s" : "") + " in " + n + " episode" + (n > 1 ? "s" : "") +
      (done ? "" : " so far\u2026");
  }

  function run(query) {
    var mine = ++generation;
    found = [];
    shown = 0;
    list.textContent = "";
    more.hidden = true;
    podscribe.firstHitAt = 0;
    podscribe.searchStartedAt = performance.now();
    history.replaceState(null, "", query ? "#q=" + encodeURIComponent(query) : location.pathname);
    if (!podscribe.parse(query).length) {
      say(query.trim() ? "Type letters or digits to search for." : "");
      return;
    }
    say("Searching\u2026");
    var showing = Promise.resolve();
    podscribe
      .search(query, catalog, function (hits, done) {
        found = found.concat(hits);
        if (shown < PAGE && found.length > shown) showing = showing.then(function () { return showMore(mine); });
        return showing.then(function () {
          if (mine === generation) say(count(done));
        });
      }, function () { return mine === generation; })
      .catch(function (err) {
        if (mine === generation) say("The search index could not be read (" + err.message + "): rebuild the site.");
      });
  }

  var timer = 0;
  input.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(function () { run(input.value); }, 30);
  });
  more.querySelector("button").addEventListener("click", function () { showMore(generation); });
  var q = /^#q=(.*)$/.exec(location.hash);
  if (q) {
    input.value = decodeURIComponent(q[1]);
    run(input.value);
  }
})();
