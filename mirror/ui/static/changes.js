// The commit form's metadata rows: "Add metadata row" adds one in place instead of sending the
// form back to the server for it (which is what the button does without script).
"use strict";

function addMetadataRow(form) {
  const rows = form.querySelector(".meta-rows");
  const last = rows ? rows.querySelector(".meta-row:last-of-type") : null;
  if (!last) {
    return false;
  }
  const number = rows.querySelectorAll(".meta-row").length + 1;
  const row = last.cloneNode(true);
  row.querySelectorAll("input").forEach((input) => {
    const id = `${input.name === "meta_key" ? "meta-key" : "meta-value"}-${number}`;
    const label = row.querySelector(`label[for="${input.id}"]`);
    if (label) {
      label.htmlFor = id;
    }
    input.id = id;
    input.value = "";
  });
  rows.appendChild(row);
  row.querySelector("input").focus();
  return true;
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("form.commit-form").forEach((form) => {
    const button = form.querySelector('button[name="add_row"]');
    if (!button) {
      return;
    }
    button.addEventListener("click", (event) => {
      if (addMetadataRow(form)) {
        event.preventDefault();
      }
    });
  });
});
