// @ts-check
// The page's message box (#message): what stopped or is missing, and what to do about it. A run's
// own error goes beside the Run button instead (form.js).

import { $ } from "./dom.js";

/**
 * @typedef {{ id: string, label: string, onclick: () => void }} MessageAction a button beside the message
 */

/** Show a message of `kind` ("error" or "info"), with a button when `action` gives one.
 * @param {string} text
 * @param {string} [kind]
 * @param {MessageAction | null} [action] */
export function showMessage(text, kind = "error", action = null) {
  const box = $("message");
  box.hidden = false;
  box.className = kind;
  box.textContent = text;
  if (action) {
    const button = document.createElement("button");
    button.type = "button";
    button.id = action.id;
    button.textContent = action.label;
    button.addEventListener("click", action.onclick);
    box.append(" ", button);
  }
}
