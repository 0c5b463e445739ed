/*
 * /server-status's script (served as ?js; see status_assets.c): graphs of
 * the last minutes from ?json's series, drawn as inline SVG, and the page's
 * rows, warnings and rates refreshed every two seconds.  It asks this
 * server only (same origin, relative URLs) and needs nothing inline, so
 * the page's Content-Security-Policy (script-src 'self') holds.
 */
"use strict";
(function () {
  var SVG_NS = "http://www.w3.org/2000/svg"; /* a namespace's name: nothing is fetched */
  var REFRESH_MS = 2000, W = 440, H = 120, PAD = 34;
  var data = null;     /* ?json's series (one a second), merged as they come */
  var data10 = null;   /* ... and series_10s (sums of ten seconds), for the last hour */
  var backends = [];   /* ?json's backends: slot, pool, backend, state */
  var span = 300;      /* seconds shown */
  var busy = false;

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function svgEl(tag, attrs) {
    var e = document.createElementNS(SVG_NS, tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }

  function human(v) {
    var units = ["", "k", "M", "G", "T"], i = 0;
    while (Math.abs(v) >= 1000 && i < units.length - 1) { v /= 1000; i++; }
    return (v >= 100 || v === Math.round(v) ? Math.round(v) : v.toFixed(1)) + units[i];
  }

  /* The charts: their titles and the series each draws (a path into data). */
  function charts() {
    var list = [
      {id: "requests", title: "Requests/s by protocol",
       lines: [["HTTP/1.1", "requests.http1"], ["HTTP/2", "requests.h2"],
               ["HTTP/3", "requests.h3"], ["FTP", "requests.ftp"]]},
      {id: "bytes", title: "Bytes/s sent", lines: [["bytes/s", "bytes"]]},
      {id: "connections", title: "Open connections", gauge: true,
       lines: [["open", "connections"]]},
      {id: "errors", title: "Errors/s: 4xx, 5xx, refused, timed out",
       lines: [["4xx", "responses_4xx"], ["5xx", "responses_5xx"],
               ["refused", "refused"], ["timed out", "timeouts"]]},
      {id: "cache", title: "Cache hits vs misses /s",
       lines: [["hits", "cache_hits"], ["misses", "cache_misses"]]},
      {id: "latency", title: "Latency (ms, at most; HTTP only)", scale: 0.001, gauge: true,
       lines: [["p50", "latency_p50_us"], ["p90", "latency_p90_us"], ["p99", "latency_p99_us"]]}
    ];
    backends.forEach(function (b) {
      var i = seriesBackend(b.slot);
      if (i < 0) return;
      list.push({id: "backend-" + b.slot, title: "Backend " + b.pool + " " + b.backend +
                 " (" + b.state + ")", bad: b.state !== "up" && b.state !== "slowstart",
                 lines: [["requests", "backends." + i + ".requests"],
                         ["failures", "backends." + i + ".failures"]]});
    });
    return list;
  }

  function seriesBackend(slot) {
    var b = data && data.backends || [];
    for (var i = 0; i < b.length; i++) if (b[i].slot === slot) return i;
    return -1;
  }

  function path(obj, p) {
    p.split(".").forEach(function (k) { obj = obj == null ? undefined : obj[k]; });
    return obj || [];
  }

  /* Append the newer samples of s to d, keeping the last d.slots: the new d. */
  function merge(data, s) {
    if (!data) return s;
    function add(a, b) {
      for (var k in b) {
        if (Array.isArray(b[k]) && k !== "backends") {
          a[k] = (a[k] || []).concat(b[k]).slice(-data.slots);
        } else if (k === "backends") {
          b[k].forEach(function (nb, i) { if (a[k][i]) add(a[k][i], nb); });
        } else if (typeof b[k] === "object") {
          add(a[k], b[k]);
        }
      }
    }
    add(data, s);
    return data;
  }

  function draw(fig, c) {
    /* the last hour from the ten-second sums (per second: a tenth of each) */
    var set = span > 900 && data10 ? data10 : data;
    var t = set.t, now = data.t.length ? data.t[data.t.length - 1] : 0, from = now - span;
    var start = 0;
    while (start < t.length && t[start] <= from) start++;
    var scale = (c.scale || 1) / (c.gauge ? 1 : set.interval), max = 0, lines = [];
    c.lines.forEach(function (l, i) {
      var v = path(set, l[1]).slice(start).map(function (x) { return x * scale; });
      if (i > 0 && !v.some(function (x) { return x > 0; }) && c.lines.length > 2) return;
      v.forEach(function (x) { if (x > max) max = x; });
      lines.push({name: l[0], cls: "c" + i, v: v});
    });
    max = max > 0 ? max * 1.1 : 1;
    var svg = svgEl("svg", {width: W, height: H, viewBox: "0 0 " + W + " " + H,
                            "data-chart": c.id, "data-points": t.length - start,
                            role: "img", "aria-label": c.title});
    [0, 0.5, 1].forEach(function (f) {
      var y = (H - 22) * (1 - f) + 10;
      svg.appendChild(svgEl("line", {x1: PAD, x2: W, y1: y, y2: y, "class": "grid"}));
      var label = svgEl("text", {x: PAD - 3, y: y + 4, "text-anchor": "end", "class": "axis"});
      label.textContent = human(max * f);
      svg.appendChild(label);
    });
    var bottom = svgEl("text", {x: PAD, y: H - 1, "class": "axis"});
    bottom.textContent = "-" + (span >= 3600 ? span / 3600 + " h" :
                                span >= 120 ? span / 60 + " min" : span + " s");
    svg.appendChild(bottom);
    var right = svgEl("text", {x: W, y: H - 1, "text-anchor": "end", "class": "axis"});
    right.textContent = "now";
    svg.appendChild(right);
    var legend = el("div", {"class": "legend"});
    lines.forEach(function (l) {
      var pts = [];
      for (var i = 0; i < l.v.length; i++) {
        var x = PAD + (W - PAD) * (t[start + i] - from) / span;
        var y = (H - 22) * (1 - l.v[i] / max) + 10;
        pts.push(x.toFixed(1) + "," + y.toFixed(1));
      }
      svg.appendChild(svgEl("polyline", {points: pts.join(" "), "class": l.cls}));
      /* the legend: the last 10 s (latency: of the seconds that had requests) */
      var last = l.v.slice(set === data ? -10 : -1).filter(function (x) { return !c.scale || x > 0; }), avg = 0;
      last.forEach(function (x) { avg += x / last.length; });
      legend.appendChild(el("span", {"class": l.cls}, l.name + " " + human(avg)));
    });
    fig.textContent = "";
    fig.className = "chart" + (c.bad ? " bad" : "");
    fig.appendChild(el("figcaption", {}, c.title));
    fig.appendChild(svg);
    fig.appendChild(legend);
  }

  function render() {
    var box = document.getElementById("charts");
    if (!box || !data) return;
    var list = charts(), seen = {};
    list.forEach(function (c) {
      var id = "chart-" + c.id, fig = document.getElementById(id);
      if (!fig) {
        fig = el("figure", {id: id, "class": "chart"});
        box.appendChild(fig);
      }
      seen[id] = true;
      draw(fig, c);
    });
    Array.prototype.slice.call(box.children).forEach(function (f) {
      if (!seen[f.id]) box.removeChild(f);
    });
  }

  function controls(graphs) {
    var bar = el("div", {id: "controls"});
    bar.appendChild(el("span", {id: "state"}, "loading..."));
    bar.appendChild(document.createTextNode(" "));
    [[60, "1 min"], [300, "5 min"], [900, "15 min"], [3600, "1 h"]].forEach(function (o) {
      var b = el("button", {type: "button", "data-span": o[0]}, o[1]);
      if (o[0] === span) b.className = "on";
      b.addEventListener("click", function () {
        span = o[0];
        Array.prototype.forEach.call(bar.querySelectorAll("button"), function (x) {
          x.className = x === b ? "on" : "";
        });
        render();
      });
      bar.appendChild(b);
    });
    graphs.textContent = "";
    graphs.appendChild(bar);
    graphs.appendChild(el("div", {id: "charts"}));
  }

  function say(text, bad) {
    var s = document.getElementById("state");
    if (!s) return;
    s.textContent = text;
    s.className = bad ? "bad" : "";
  }

  /* The page anew from the server: everything in #live but the graphs. */
  function swapLive(html) {
    var doc = new DOMParser().parseFromString(html, "text/html");
    var fresh = doc.getElementById("live"), live = document.getElementById("live");
    var graphs = document.getElementById("graphs");
    if (!fresh || !live || !graphs) return;
    var open = {};
    Array.prototype.forEach.call(live.querySelectorAll("details[open]"), function (d) {
      open[d.id] = true;
    });
    var node = document.importNode(fresh, true);
    var place = node.querySelector("#graphs");
    if (place) place.parentNode.replaceChild(graphs, place);
    Array.prototype.forEach.call(node.querySelectorAll("details"), function (d) {
      if (open[d.id]) d.open = true;
    });
    live.parentNode.replaceChild(node, live);
  }

  function refresh() {
    if (busy) return;
    busy = true;
    var last = data && data.t.length ? data.t[data.t.length - 1] : 0;
    var page = fetch(location.pathname, {cache: "no-store"}).then(function (r) {
      if (!r.ok) throw new Error("the page: " + r.status);
      return r.text();
    });
    fetch("?json" + (last ? "&since=" + last : ""), {cache: "no-store"}).then(function (r) {
      if (!r.ok) throw new Error("?json: " + r.status);
      return r.json();
    }).then(function (j) {
      var slots = (j.backends || []).map(function (b) { return b.slot; }).join();
      var had = (backends || []).map(function (b) { return b.slot; }).join();
      backends = j.backends || [];
      if (slots !== had) data = data10 = null; /* other backends: anew next time */
      if (data || !last) {
        data = merge(data, j.series);
        data10 = merge(data10, j.series_10s);
      }
      return page;
    }).then(function (html) {
      swapLive(html);
      render();
      say("updated " + new Date().toLocaleTimeString() + ", every " + REFRESH_MS / 1000 + " s");
    }).catch(function (e) {
      say("not answering (" + e.message + "); trying again", true);
    }).then(function () { busy = false; });
  }

  function start() {
    var graphs = document.getElementById("graphs");
    if (!graphs) return;
    controls(graphs);
    refresh();
    setInterval(refresh, REFRESH_MS);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
