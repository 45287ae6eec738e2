// Forms of rows (garbage collection rules, an import's sources and metadata): a button marked
// data-add-row="<container id>" adds a blank row in place, instead of sending the form back to
// the server for one (which is what the button does without script).
"use strict";

function addRow(container) {
  const rows = container.querySelectorAll(":scope > *");
  const last = rows[rows.length - 1];
  if (!last) {
    return false;
  }
  const number = rows.length + 1;
  const row = last.cloneNode(true);
  row.querySelectorAll("[id]").forEach((element) => {
    const id = element.id.replace(/-\d+$/, `-${number}`);
    const label = row.querySelector(`label[for="${element.id}"]`);
    if (label) {
      label.htmlFor = id;
    }
    element.id = id;
  });
  row.querySelectorAll("input").forEach((input) => {
    input.value = "";
  });
  row.querySelectorAll("select").forEach((select) => {
    select.selectedIndex = 0;
  });
  container.appendChild(row);
  const first = row.querySelector("input, select");
  if (first) {
    first.focus();
  }
  return true;
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("button[data-add-row]").forEach((button) => {
    const container = document.getElementById(button.dataset.addRow);
    if (!container) {
      return;
    }
    button.addEventListener("click", (event) => {
      if (addRow(container)) {
        event.preventDefault();
      }
    });
  });
});
