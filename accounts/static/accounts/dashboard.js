/* The usage dashboard's charts (Chart.js, vendored), the zone cookie and the copy button.
   Data comes from the json_script element #usage-data; there is no inline script. */
(function () {
  "use strict";
  var TZ_COOKIE = "veena_tz";

  function rememberZone() {
    var zone;
    try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone; } catch (e) { return; }
    if (!zone) { return; }
    var had = document.cookie.split("; ").some(function (c) { return c.indexOf(TZ_COOKIE + "=") === 0; });
    document.cookie = TZ_COOKIE + "=" + encodeURIComponent(zone) + "; path=/; max-age=31536000; samesite=lax";
    var params = new URLSearchParams(window.location.search);
    // First visit without a zone in the URL: show the viewer's own days at once.
    if (!had && !params.get("tz") && document.getElementById("usage-data") && zone !== "UTC") {
      params.set("tz", zone);
      window.location.search = params.toString();
    }
  }

  var COLORS = ["#2563eb", "#d97706", "#059669", "#7c3aed", "#db2777", "#0891b2", "#65a30d", "#dc2626"];

  function barColors(color, partial) {
    return partial.map(function (p) { return p ? color + "55" : color; });
  }

  function baseOptions(stacked) {
    return {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      plugins: { legend: { display: stacked } },
      scales: { x: { stacked: stacked, ticks: { maxRotation: 0, autoSkip: true } }, y: { stacked: stacked, beginAtZero: true } }
    };
  }

  function seriesChart(canvas, data, metric) {
    return new Chart(canvas, {
      type: "bar",
      data: {
        labels: data.labels,
        datasets: [{ label: metric, data: data.series[metric], backgroundColor: barColors(COLORS[0], data.partial) }]
      },
      options: baseOptions(false)
    });
  }

  function errorsChart(canvas, data) {
    var codes = Object.keys(data.errors);
    var datasets = codes.map(function (code, i) {
      return { label: code, data: data.errors[code], backgroundColor: barColors(COLORS[(i + 1) % COLORS.length], data.partial) };
    });
    if (!datasets.length) {
      datasets = [{ label: "errors", data: data.labels.map(function () { return 0; }), backgroundColor: COLORS[7] }];
    }
    return new Chart(canvas, { type: "bar", data: { labels: data.labels, datasets: datasets }, options: baseOptions(true) });
  }

  function latencyChart(canvas, data) {
    var names = [["ttfb_p50", "TTS TTFB p50"], ["ttfb_p95", "TTS TTFB p95"], ["asr_p50", "ASR p50"], ["asr_p95", "ASR p95"]];
    var datasets = names.map(function (pair, i) {
      return { label: pair[1], data: data.latency[pair[0]], borderColor: COLORS[i], backgroundColor: COLORS[i], spanGaps: true, borderDash: pair[0].slice(-2) === "95" ? [5, 3] : [] };
    });
    var options = baseOptions(false);
    options.plugins.legend.display = true;
    return new Chart(canvas, { type: "line", data: { labels: data.days, datasets: datasets }, options: options });
  }

  function drawCharts() {
    var node = document.getElementById("usage-data");
    if (!node || typeof Chart === "undefined") { return; }
    var data = JSON.parse(node.textContent);
    document.querySelectorAll("canvas[data-chart]").forEach(function (canvas) {
      var kind = canvas.getAttribute("data-chart");
      if (kind === "errors") { errorsChart(canvas, data); }
      else if (kind === "latency") { latencyChart(canvas, data); }
      else { seriesChart(canvas, data, kind); }
    });
  }

  function copyButtons() {
    document.querySelectorAll("[data-copy-target]").forEach(function (button) {
      button.addEventListener("click", function () {
        var text = document.getElementById(button.getAttribute("data-copy-target")).textContent.trim();
        var done = function () { var note = document.getElementById("copied"); if (note) { note.hidden = false; } };
        if (navigator.clipboard && window.isSecureContext) {
          navigator.clipboard.writeText(text).then(done);
        } else {
          var area = document.createElement("textarea");
          area.value = text; document.body.appendChild(area); area.select();
          document.execCommand("copy"); document.body.removeChild(area); done();
        }
      });
    });
  }

  rememberZone();
  drawCharts();
  copyButtons();
})();
