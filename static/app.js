// Slipway's only script: small progressive enhancements. Every page works without it.
(function () {
  "use strict";

  // -- New-app form: show the fields of the chosen source only. --------------------------------
  function syncSource(form) {
    var checked = form.querySelector('input[name="source"]:checked');
    if (!checked) return;
    form.querySelectorAll("fieldset[data-source]").forEach(function (fs) {
      var on = fs.getAttribute("data-source") === checked.value;
      fs.hidden = !on;
      fs.disabled = !on;
    });
  }
  function initSourceChoice(root) {
    root.querySelectorAll("form.app-form").forEach(function (form) {
      syncSource(form);
      form.addEventListener("change", function (e) {
        if (e.target.name === "source") syncSource(form);
      });
    });
  }

  // -- Confirm dialog: htmx loads the confirm step into it; without JS the link opens a page. --
  function dialog() { return document.getElementById("confirm-dialog"); }
  document.addEventListener("htmx:afterSwap", function (e) {
    var d = dialog();
    if (d && e.detail.target && e.detail.target.id === "dialog-body" && !d.open) {
      d.showModal();
      var first = d.querySelector("[autofocus], button, a[href]");
      if (first) first.focus();
    }
  });
  document.addEventListener("click", function (e) {
    var link = e.target.closest && e.target.closest("[data-close-dialog]");
    var d = dialog();
    if (link && d && d.open && d.contains(link)) {
      e.preventDefault();
      d.close();
    }
  });
  document.addEventListener("close", function (e) {
    if (e.target === dialog()) document.getElementById("dialog-body").innerHTML = "";
  }, true);

  // -- Logs: follow new lines while the reader is at the bottom; stop when they scroll up. --
  var SLACK = 24; // pixels from the bottom that still count as "at the bottom"
  function atBottom(box) { return box.scrollHeight - box.scrollTop - box.clientHeight <= SLACK; }
  function jumpButton(box) {
    var section = box.closest("section, [hx-ext]") || document;
    return section.querySelector("[data-jump-latest]");
  }
  function initLog(box) {
    if (box.dataset.autoscrollReady) return;
    box.dataset.autoscrollReady = "1";
    box.dataset.follow = "1";
    box.scrollTop = box.scrollHeight;
    box.addEventListener("scroll", function () {
      var follow = atBottom(box);
      box.dataset.follow = follow ? "1" : "";
      var b = jumpButton(box);
      if (b && follow) b.hidden = true;
    });
    var b = jumpButton(box);
    if (b) b.addEventListener("click", function () {
      box.scrollTop = box.scrollHeight;
      box.dataset.follow = "1";
      b.hidden = true;
      box.focus();
    });
  }
  document.addEventListener("htmx:sseMessage", function (e) {
    var box = e.target.closest && e.target.closest("[data-autoscroll]");
    if (!box) return;
    var empty = box.querySelector(".empty-log");
    if (empty) empty.remove();
    if (box.dataset.follow) {
      box.scrollTop = box.scrollHeight;
    } else {
      var b = jumpButton(box);
      if (b) b.hidden = false;
    }
  });

  // -- Streams: resume where the page was. ------------------------------------------------------
  // EventSource resends the last id it saw (Last-Event-ID) when it reconnects by itself; when
  // the SSE extension has to open a new EventSource after an error, that id would be lost, so
  // the new one asks for everything after it with ?after=.
  var lastIds = {};
  function withAfter(url, id) {
    var u = new URL(url, window.location.href);
    u.searchParams.set("after", id);
    return u.pathname + u.search;
  }
  if (window.htmx && htmx.createEventSource) {
    var create = htmx.createEventSource;
    htmx.createEventSource = function (url) {
      var key = new URL(url, window.location.href).pathname;
      var source = create(lastIds[key] ? withAfter(url, lastIds[key]) : url);
      var names = {};
      document.querySelectorAll("[sse-swap]").forEach(function (el) {
        el.getAttribute("sse-swap").split(",").forEach(function (n) { names[n.trim()] = true; });
      });
      Object.keys(names).forEach(function (name) {
        source.addEventListener(name, function (e) { if (e.lastEventId) lastIds[key] = e.lastEventId; });
      });
      return source;
    };
  }

  function init(root) {
    initSourceChoice(root);
    root.querySelectorAll("[data-autoscroll]").forEach(initLog);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { init(document); });
  } else {
    init(document);
  }
})();
