// An asynchronous merge's page: while the merge runs, ask for the page again every second and
// put its fresh status in place, until the merge has ended. Without script, a <noscript> meta
// refresh reloads the whole page instead.
"use strict";

function followMerge(section) {
  const every = 1000 * (Number(section.dataset.refresh) || 1);
  const again = () => window.setTimeout(check, every);
  async function check() {
    let response;
    try {
      response = await fetch(window.location.href, {
        headers: { Accept: "text/html" },
        cache: "no-store",
        credentials: "same-origin",
      });
    } catch {
      again(); // the server may be restarting: keep asking
      return;
    }
    const page = new DOMParser().parseFromString(await response.text(), "text/html");
    const fresh = page.getElementById("merge-status");
    if (!fresh) {
      // signed out, or the task is gone: let the browser show whatever the page is now
      window.location.reload();
      return;
    }
    section.replaceChildren(...Array.from(fresh.childNodes, (node) => document.importNode(node, true)));
    section.dataset.completed = fresh.dataset.completed;
    if (fresh.dataset.completed === "true") {
      document.title = page.title;
    } else {
      again();
    }
  }
  again();
}

document.addEventListener("DOMContentLoaded", () => {
  const section = document.getElementById("merge-status");
  if (section && section.dataset.completed !== "true") {
    followMerge(section);
  }
});
