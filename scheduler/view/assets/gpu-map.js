// The GPU map: renders the view model (scheduler/view/model.py, as JSON) into the page.
// Data comes embedded (tessera simulate --output html) or from data-source every data-refresh
// seconds (tessera run --gpu-map). Text goes in through textContent only: pod names and messages
// come from the cluster and are never parsed as HTML.
(function () {
  "use strict";

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) {
      if (key === "text") { node.textContent = attrs[key]; }
      else if (key === "className") { node.className = attrs[key]; }
      else { node.setAttribute(key, attrs[key]); }
    });
    (children || []).forEach(function (child) { if (child) { node.appendChild(child); } });
    return node;
  }

  function table(headers, rows, empty) {
    if (!rows.length) { return el("p", {className: "empty", text: empty}); }
    var head = el("tr", {}, headers.map(function (h) { return el("th", {text: h}); }));
    var body = rows.map(function (cells) {
      return el("tr", {}, cells.map(function (cell, i) {
        return el("td", {text: cell === "" || cell === null ? "-" : String(cell),
                         className: i === cells.length - 1 ? "message" : ""});
      }));
    });
    return el("table", {}, [el("thead", {}, [head]), el("tbody", {}, body)]);
  }

  function holderText(h) {
    var notes = [h.amount, h.status === "bound" ? "" : h.status].filter(Boolean);
    return h.pod + (notes.length ? " (" + notes.join(", ") + ")" : "");
  }

  function gpu(g) {
    var title = ["GPU " + g.index + ": " + g.state, g.model, g.memory, g.device,
                 g.numa_node ? "NUMA " + g.numa_node : "", g.nvlink_group ? "NVLink group " + g.nvlink_group : "",
                 g.used ? "in use " + g.used : ""].filter(Boolean).join(" · ");
    if (g.reason) { title += "\n" + g.reason; }
    if (g.holders.length) { title += "\n" + g.holders.map(holderText).join("\n"); }
    var cell = el("span", {className: "gpu state-" + g.state, title: title, "data-gpu": String(g.index),
                           "data-state": g.state, "data-reason": g.reason,
                           "data-numa": g.numa_node || "", "data-nvlink": g.nvlink_group || "",
                           "data-holders": g.holders.map(function (h) { return h.pod; }).join(" ")});
    if (g.state === "slices" || (g.state === "gated" && g.fill < 1)) {
      var fill = el("span", {className: "fill"});
      fill.style.height = Math.round(g.fill * 100) + "%";
      cell.appendChild(fill);
    }
    cell.appendChild(el("span", {className: "label", text: String(g.index)}));
    return cell;
  }

  function node(n) {
    var name = el("div", {className: "node-name", text: n.name});
    if (n.cordoned) { name.appendChild(el("span", {className: "badge", text: "cordoned"})); }
    var meta = n.gpus_used + "/" + n.gpus_total + " GPUs" +
      (n.gpus_unavailable ? " · " + n.gpus_unavailable + " unavailable" : "") +
      (n.conflicts ? " · " + n.conflicts + (n.conflicts === 1 ? " conflict" : " conflicts") : "") +
      " · CPU " + n.cpu + " · " + n.pods + (n.pods === 1 ? " pod" : " pods");
    var box = el("div", {className: "node" + (n.cordoned ? " cordoned" : ""), "data-node": n.name}, [
      name, el("div", {className: "node-meta", text: meta}),
      el("div", {className: "gpus"}, n.gpus.map(gpu))]);
    var notes = n.notes.concat(n.taints.length ? ["taints: " + n.taints.join(", ")] : []);
    if (notes.length) { box.appendChild(el("ul", {className: "notes"}, notes.map(function (t) { return el("li", {text: t}); }))); }
    return box;
  }

  function when(seconds, source) {
    if (source === "simulate") { return "virtual time " + Math.round(seconds) + " s"; }
    return new Date(seconds * 1000).toLocaleTimeString();
  }

  function replace(id, child) {
    var host = document.getElementById(id);
    host.textContent = "";
    host.appendChild(child);
  }

  function render(view) {
    var origin = {live: "live scheduler (leader)", standby: "standby replica: a warm cache, no decisions (the leader's page has them)",
                  cluster: "listed cluster", simulate: "tessera simulate"}[view.source] || view.source;
    document.getElementById("meta").textContent = origin + " · " + when(view.generated, view.source) +
      (view.profiles.length ? " · profiles " + view.profiles.join(", ") : "");
    document.getElementById("summary").textContent = view.summary.line;
    var nodes = el("div", {className: "nodes"}, view.nodes.map(node));
    if (!view.nodes.length) { nodes = el("p", {className: "empty", text: "No nodes."}); }
    replace("nodes", nodes);
    replace("pending", table(["Pod", "Wants", "Gang", "Reason", "Node", "Message"], view.pending.map(function (p) {
      return [p.pod, p.wants, p.gang, p.reason || (view.source === "standby" ? "the leader decides" : "not tried yet"),
              p.node, p.message];
    }), "No pending pods."));
    replace("gangs", table(["Gang", "Phase", "Members", "Minimum", "Placed", "Leaving", "Waiting", "Why"], view.gangs.map(function (g) {
      return [g.gang, g.phase, g.members, g.minimum === null ? "PodGroup not found" : g.minimum, g.placed, g.leaving, g.pending, g.message];
    }), "No gang is waiting."));
    replace("overruled", table(["Pod", "What happened"], view.overruled.map(function (o) {
      return [o.pod, o.message];
    }), "No recorded Binding overruled this replay."));
    document.getElementById("overruled-section").hidden = !view.overruled.length;
    replace("input-warnings", table(["Reason", "Message"], view.input_warnings.map(function (w) {
      return [w.reason, w.message];
    }), "The replay read all its input."));
    document.getElementById("input-section").hidden = !view.input_warnings.length;
    replace("decisions", table(["When", "Pod", "Outcome", "Node", "Message"], view.decisions.map(function (d) {
      return [when(d.at, view.source), d.pod, d.outcome, d.node, d.message];
    }), "No decisions yet."));
    document.body.setAttribute("data-rendered", String(view.generated));
  }

  function status(text) {
    var line = document.getElementById("status");
    line.textContent = text;
    line.hidden = !text;
  }

  var source = document.body.getAttribute("data-source");
  var every = Math.max(1, Number(document.body.getAttribute("data-refresh")) || 3) * 1000;

  function load() {
    fetch(source, {cache: "no-store", credentials: "omit"})
      .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.json(); })
      .then(function (view) { render(view); status(""); })
      .catch(function (err) { status("cannot refresh: " + err.message + " (showing the last picture)"); })
      .then(function () { setTimeout(load, every); });
  }

  var embedded = document.getElementById("gpu-map-data").textContent.trim();
  if (embedded) { render(JSON.parse(embedded)); }
  if (source) { load(); }
}());
