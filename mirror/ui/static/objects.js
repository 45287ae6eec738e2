// The Objects tab's behaviour that needs script (the page works without it).
// - Uploads: each file is posted on its own (so each gets a progress bar), five at a time, with
//   the session's CSRF token in X-CSRF-Token; files can also be dropped on the upload card.
//   When every file is in, the folder's listing is read again and put in place.
"use strict";

const PARALLEL = 5;

function csrfToken() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  return meta ? meta.content : "";
}

function destinationFolder(prefix) {
  let folder = prefix.trim().replace(/^\/+/, "");
  if (folder && !folder.endsWith("/")) {
    folder += "/";
  }
  return folder;
}

// One file's line in the progress list: its name, a progress bar and what happened.
function progressLine(list, file) {
  const item = document.createElement("li");
  item.dataset.state = "waiting";
  const name = document.createElement("span");
  name.className = "upload-name";
  name.textContent = file.name;
  const bar = document.createElement("progress");
  bar.max = file.size || 1;
  bar.value = 0;
  bar.setAttribute("aria-label", "Upload of " + file.name);
  const status = document.createElement("span");
  status.className = "upload-status";
  status.textContent = "Waiting";
  item.append(name, bar, status);
  list.append(item);
  return {
    progress(loaded) {
      item.dataset.state = "uploading";
      bar.value = Math.min(loaded, bar.max);
      status.textContent = Math.round((100 * bar.value) / bar.max) + "%";
    },
    done() {
      item.dataset.state = "done";
      bar.value = bar.max;
      status.textContent = "Uploaded";
    },
    failed(message) {
      item.dataset.state = "failed";
      status.textContent = "Failed: " + message;
      status.setAttribute("role", "alert");
    },
  };
}

function messageOf(request) {
  try {
    const body = JSON.parse(request.responseText);
    if (body && typeof body.message === "string") {
      return body.message;
    }
  } catch (error) {
    // not JSON: a page (the session ended, or the request was refused)
  }
  return request.status ? "HTTP " + request.status + " " + request.statusText : "the connection failed";
}

function sendOne(form, file, line) {
  return new Promise((resolve) => {
    const body = new FormData();
    body.append("branch", form.elements.branch.value);
    body.append("prefix", form.elements.prefix.value);
    body.append("files", file, file.name);
    const request = new XMLHttpRequest();
    request.open("POST", form.action);
    request.setRequestHeader("X-CSRF-Token", csrfToken());
    request.setRequestHeader("Accept", "application/json");
    request.upload.addEventListener("progress", (event) => line.progress(event.loaded));
    request.addEventListener("load", () => {
      if (request.status === 201) {
        line.done();
        resolve(true);
      } else {
        line.failed(messageOf(request));
        resolve(false);
      }
    });
    request.addEventListener("error", () => {
      line.failed(messageOf(request));
      resolve(false);
    });
    request.send(body);
  });
}

// Read the folder's listing again and put it in place of the one shown.
async function refreshListing(url) {
  const answer = await fetch(url, { headers: { Accept: "text/html" }, credentials: "same-origin" });
  if (!answer.ok) {
    return;
  }
  const fresh = new DOMParser().parseFromString(await answer.text(), "text/html");
  const found = fresh.getElementById("listing");
  const shown = document.getElementById("listing");
  if (found && shown) {
    shown.replaceWith(document.adoptNode(found));
  }
}

async function upload(form, files) {
  const list = document.getElementById("upload-progress");
  list.replaceChildren();
  const queue = Array.from(files).map((file, index) => [index, file, progressLine(list, file)]);
  const folder = destinationFolder(form.elements.prefix.value);
  // named in the order the files were chosen, whichever upload ends first
  const arrived = new Array(queue.length).fill(null);
  const worker = async () => {
    while (queue.length) {
      const [index, file, line] = queue.shift();
      if (await sendOne(form, file, line)) {
        arrived[index] = folder + file.name;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(PARALLEL, queue.length) }, worker));
  const uploaded = arrived.filter((path) => path !== null);
  const listing = new URL(form.dataset.listing, window.location.href);
  listing.searchParams.set("path", folder);
  const here = new URL(window.location.href);
  if ((here.searchParams.get("path") || "") === folder) {
    await refreshListing(listing.toString());
  } else if (uploaded.length) {
    uploaded.forEach((path) => listing.searchParams.append("uploaded", path));
    window.location.assign(listing.toString());
  }
}

function armUpload(form) {
  const input = form.elements.files;
  form.addEventListener("submit", (event) => {
    if (!input.files.length) {
      return; // the server says what is missing
    }
    event.preventDefault();
    upload(form, input.files).then(() => {
      input.value = "";
    });
  });
  const zone = document.getElementById("drop-zone");
  const card = form.closest(".upload");
  if (!zone || !card) {
    return;
  }
  zone.hidden = false;
  card.addEventListener("dragover", (event) => {
    event.preventDefault();
    card.classList.add("dragging");
  });
  card.addEventListener("dragleave", () => card.classList.remove("dragging"));
  card.addEventListener("drop", (event) => {
    event.preventDefault();
    card.classList.remove("dragging");
    const files = event.dataTransfer ? event.dataTransfer.files : [];
    if (files.length) {
      upload(form, files);
    }
  });
}

document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("upload-form");
  if (form) {
    armUpload(form);
  }
});
