// Search across the archive in the browser, with no server: the index is split into scripts (search/...) that
// this file loads only when a search needs them (a page opened from disk cannot fetch() files beside it, but it
// can load scripts). Words are folded and cut as pipeline/browse/text.py does: NFKD, marks dropped, lower case;
// a word is a run of letters and digits. A query: words (each somewhere in the segment) and "quoted phrases"
// (their words one after the other); while typing, the last word also matches the words it starts.
(function () {
  "use strict";
  var podscribe = (window.podscribe = window.podscribe || {});
  podscribe.data = podscribe.data || {};
  podscribe.put = function (name, data) { podscribe.data[name] = data; };

  var WORD = /[\p{L}\p{N}]+/gu;
  var MARKS = /\p{M}/gu;

  function foldChar(ch) { return ch.normalize("NFKD").replace(MARKS, "").toLowerCase(); }
  function fold(text) { return text.normalize("NFKD").replace(MARKS, "").toLowerCase(); }
  function words(text) { return fold(text).match(WORD) || []; }

  // The words of an original text with where each is in it: [[folded word, start, end], ...].
  function tokens(text) {
    var folded = "", where = [];
    for (var i = 0; i < text.length; ) {
      var cp = text.codePointAt(i), ch = String.fromCodePoint(cp), f = foldChar(ch);
      folded += f;
      for (var k = 0; k < f.length; k++) where.push(i);
      i += ch.length;
    }
    where.push(text.length);
    var out = [], m;
    WORD.lastIndex = 0;
    while ((m = WORD.exec(folded))) {
      var last = where[m.index + m[0].length - 1];
      out.push([m[0], where[m.index], last + String.fromCodePoint(text.codePointAt(last)).length]);
    }
    return out;
  }

  // Terms of a query, as text.parse makes them; the last word of an unquoted query still being typed is a prefix.
  function parse(query) {
    var parts = query.replace(/[\u201c\u201d]/g, '"').split('"'), terms = [], seen = Object.create(null);
    parts.forEach(function (part, i) {
      var found = words(part);
      if (i % 2) { if (found.length) terms.push({ words: found }); }
      else found.forEach(function (w) { terms.push({ words: [w] }); });
    });
    terms = terms.filter(function (t) { var k = t.words.join(" "); if (seen[k]) return false; seen[k] = 1; return true; });
    var last = terms[terms.length - 1];
    if (last && last.words.length === 1 && parts.length % 2 === 1 && /[\p{L}\p{N}]$/u.test(query)) last.prefix = true;
    return terms;
  }

  function keyOf(word) {
    var first = String.fromCodePoint(word.codePointAt(0));
    return /^[a-z0-9]$/.test(first) ? first : "u" + (first.codePointAt(0) >> 8).toString(16);
  }

  var loading = {};
  function load(name) {
    if (podscribe.data[name] !== undefined) return Promise.resolve(podscribe.data[name]);
    if (!loading[name]) {
      loading[name] = new Promise(function (resolve, reject) {
        var s = document.createElement("script");
        s.src = podscribe.root + "search/" + name + ".js";
        s.onload = function () { resolve(podscribe.data[name]); };
        s.onerror = function () { delete loading[name]; reject(new Error("cannot load " + s.src)); };
        document.head.appendChild(s);
      });
    }
    return loading[name];
  }

  function cumulative(deltas) {
    var out = new Int32Array(deltas.length), sum = 0;
    for (var i = 0; i < deltas.length; i++) { sum += deltas[i]; out[i] = sum; }
    return out;
  }

  // A word is any text ("constructor" too): looked up as an own property only, never one every object inherits.
  function own(table, key) {
    return table && Object.prototype.hasOwnProperty.call(table, key) ? table[key] : undefined;
  }

  var decoded = Object.create(null);
  function positionsOf(group, shard, word) {
    var id = group + "/" + word;
    if (!decoded[id]) decoded[id] = own(shard, word) ? cumulative(own(shard, word)) : new Int32Array(0);
    return decoded[id];
  }

  function union(lists) {
    if (lists.length === 1) return lists[0];
    var total = 0;
    lists.forEach(function (l) { total += l.length; });
    var out = new Int32Array(total), at = 0;
    lists.forEach(function (l) { out.set(l, at); at += l.length; });
    return out.sort();
  }

  // Positions where a term starts, in one group.
  function termPositions(group, meta, term) {
    var lists = [];
    for (var k = 0; k < term.words.length; k++) {
      var word = term.words[k], key = keyOf(word), shard = podscribe.data["g" + group + "/" + key];
      if (meta.keys.indexOf(key) < 0) return new Int32Array(0);
      if (term.prefix) {
        var found = Object.keys(shard).filter(function (w) { return w.lastIndexOf(word, 0) === 0; });
        lists.push(union(found.map(function (w) { return positionsOf(group, shard, w); })));
      } else {
        lists.push(positionsOf(group, shard, word));
      }
    }
    var starts = lists[0];
    for (var j = 1; j < lists.length; j++) {
      var next = new Set(lists[j]), kept = [];
      for (var i = 0; i < starts.length; i++) if (next.has(starts[i] + j)) kept.push(starts[i]);
      starts = kept;
    }
    return starts;
  }

  function groupMeta(group) {
    return load("g" + group + "/meta").then(function (meta) {
      if (!meta.firstsAt) {
        meta.firstsAt = cumulative(meta.firsts);
        meta.segmentOf = []; // global segment -> [episode index in group, segment index in episode]
        meta.segments.forEach(function (n, e) { for (var s = 0; s < n; s++) meta.segmentOf.push([e, s]); });
      }
      return meta;
    });
  }

  // Hits of one group: [{episode, segment, marks: [[first word, last word + 1], ...]}], in order.
  function searchGroup(group, terms) {
    return groupMeta(group).then(function (meta) {
      var keys = {};
      terms.forEach(function (t) { t.words.forEach(function (w) { keys[keyOf(w)] = 1; }); });
      var needed = Object.keys(keys).filter(function (k) { return meta.keys.indexOf(k) >= 0; });
      return Promise.all(needed.map(function (k) { return load("g" + group + "/" + k); })).then(function () {
        var bySegment = null;
        for (var i = 0; i < terms.length; i++) {
          var found = termPositions(group, meta, terms[i]), here = new Map(), firsts = meta.firstsAt, s = 0;
          for (var p = 0; p < found.length; p++) {
            var pos = found[p];
            while (s + 1 < firsts.length && firsts[s + 1] <= pos) s++;
            var from = pos - firsts[s];
            if (!here.has(s)) here.set(s, []);
            here.get(s).push([from, from + terms[i].words.length]);
          }
          if (bySegment === null) bySegment = here;
          else {
            var both = new Map();
            bySegment.forEach(function (marks, seg) { if (here.has(seg)) both.set(seg, marks.concat(here.get(seg))); });
            bySegment = both;
          }
          if (!bySegment.size) break;
        }
        var hits = [];
        (bySegment || new Map()).forEach(function (marks, seg) {
          var at = meta.segmentOf[seg];
          hits.push({ episode: meta.episodes[at[0]], segment: at[1], global: seg, marks: marks });
        });
        hits.sort(function (a, b) { return a.global - b.global; });
        return hits;
      });
    });
  }

  var WIDTH = 3; // groups searched at a time, after the first (searchGroups)

  // The groups that have every word of the query (search/words/<key>.js: word -> groups; ``keys``: the keys that
  // have a file), in the order given.
  function candidates(terms, groups, keys) {
    var needed = {};
    terms.forEach(function (t) { t.words.forEach(function (w) { needed[keyOf(w)] = 1; }); });
    var present = Object.keys(needed).filter(function (k) { return keys.indexOf(k) >= 0; });
    return Promise.all(present.map(function (k) { return load("words/" + k); })).then(function () {
      var allowed = null;
      terms.forEach(function (t) {
        t.words.forEach(function (w) {
          var dir = podscribe.data["words/" + keyOf(w)] || {}, here = new Set();
          var found = t.prefix ? Object.keys(dir).filter(function (x) { return x.lastIndexOf(w, 0) === 0; }) : [w];
          found.forEach(function (x) { (own(dir, x) || []).forEach(function (g) { here.add(g); }); });
          allowed = allowed === null ? here : new Set(Array.from(allowed).filter(function (g) { return here.has(g); }));
        });
      });
      return groups.filter(function (g) { return allowed && allowed.has(g); });
    });
  }

  // A search: the groups that have its words (search/words/), then those groups' shards.
  function search(query, catalog, onHits, live) {
    var terms = parse(query);
    if (!terms.length) return Promise.resolve(terms);
    live = live || function () { return true; };
    return candidates(terms, catalog.groups, catalog.words || []).then(function (groups) {
      if (!groups.length) return Promise.resolve(onHits([], true)).then(function () { return terms; });
      return searchGroups(terms, groups, onHits, live);
    });
  }

  // Search the groups; onHits(hits of one group, done) is called for each group in order. The first group is
  // searched alone (its hits show first, with nothing else to load and parse beside it); then WIDTH groups at a
  // time. A search that live() says is stale (another query was typed since) starts no more groups.
  function searchGroups(terms, groups, onHits, live) {
    var answers = [];
    groups.forEach(function (g, i) {
      var after = i === 0 ? Promise.resolve() : answers[Math.max(0, i - WIDTH)];
      answers.push(after.then(function () { return live() ? searchGroup(g, terms) : []; }));
    });
    var chain = Promise.resolve();
    answers.forEach(function (answer, i) {
      chain = chain.then(function () {
        return answer.then(function (hits) { return live() ? onHits(hits, i === groups.length - 1) : null; });
      });
    });
    return chain.then(function () { return terms; });
  }

  function text(episode) { return load("t/" + episode); }

  podscribe.root = podscribe.root || "";
  podscribe.search = search;
  podscribe.parse = parse;
  podscribe.tokens = tokens;
  podscribe.words = words;
  podscribe.text = text;
})();
