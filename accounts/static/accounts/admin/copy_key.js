// Copy button of the "API key created" admin page (accounts AD3).
document.addEventListener("DOMContentLoaded", function () {
  var button = document.getElementById("copy-api-key");
  if (!button) {
    return;
  }
  button.addEventListener("click", function () {
    var input = document.getElementById(button.dataset.target);
    input.select();
    if (navigator.clipboard) {
      navigator.clipboard.writeText(input.value);
    } else {
      document.execCommand("copy");
    }
    button.textContent = "Copied";
  });
});
