// The page in a real headless Chromium (Debian's), driven by playwright-core.
//   node tests/web/e2e.cjs scripted|real URL
// `scripted` expects tests/web.rs's scripted server: a hostile tool result and answer,
// a clarify, and a run that hangs in a tool. `real` asks a real model one question.
// TOOLLOOP_SCREENSHOTS=DIR saves the page at a desktop's and a phone's width.
// Exits non-zero with a message at the first thing that is not as it should be.
"use strict";
const path = require("path");
const fs = require("fs");
const os = require("os");
const { chromium } = require(path.join(process.env.TOOLLOOP_PLAYWRIGHT, "playwright-core"));

const [scenario, url] = process.argv.slice(2);
const shots = process.env.TOOLLOOP_SCREENSHOTS;

function check(cond, message) {
  if (!cond) throw new Error(message);
  console.log("ok - " + message);
}

async function ask(page, question) {
  await page.fill("#question", question);
  await page.press("#question", "Enter");
}

// Waits for the current exchange's run to end (the Stop button hides again).
async function settled(page, timeout) {
  await page.waitForSelector("#stop", { state: "hidden", timeout });
}

async function noScriptRan(page) {
  const pwned = await page.evaluate(() => window.pwned);
  check(pwned === undefined, "no script from a tool or the model ran");
  const imgs = await page.locator("main img").count();
  check(imgs === 0, "no image from a tool or the model was inserted");
  const js = await page.locator('main a[href^="javascript:" i]').count();
  check(js === 0, "no javascript: link was inserted");
}

async function scripted(page) {
  await page.click("#tools-toggle");
  await page.waitForSelector("#tool-list li >> text=get_weather");
  check(true, "the tool catalogue is visible");

  // 1. A tool call, its result, the answer; all hostile Markdown made harmless.
  await ask(page, "What is the weather report for Paris?");
  await page.waitForSelector(".exchange:nth-of-type(1) .step.call >> text=weather_report");
  await page.waitForSelector(".exchange:nth-of-type(1) .step.result");
  await page.waitForSelector(".exchange:nth-of-type(1) .answer strong >> text=sunny");
  await settled(page, 20000);
  const order = await page.$$eval(".exchange:nth-of-type(1) .step .label", (ls) => ls.map((l) => l.textContent));
  const call = order.indexOf("Tool call"), result = order.indexOf("Result");
  check(order[0] === "Thinking" && call > 0 && result > call, "steps appear in order: " + order.join(", "));
  const resultHtml = await page.innerHTML(".exchange:nth-of-type(1) .step.result");
  check(resultHtml.includes("<strong>report</strong>"), "the tool's Markdown result is rendered");
  await noScriptRan(page);
  const footer = await page.textContent(".exchange:nth-of-type(1) .footer");
  check(/iteration/.test(footer) && /tokens/.test(footer), "tokens and timings are shown: " + footer);

  // The transcript downloads as JSON lines.
  const [download] = await Promise.all([
    page.waitForEvent("download"),
    page.click(".exchange:nth-of-type(1) .footer a"),
  ]);
  const file = path.join(os.tmpdir(), `toolloop-e2e-${process.pid}.jsonl`);
  await download.saveAs(file);
  const lines = fs.readFileSync(file, "utf8").trim().split("\n").map((l) => JSON.parse(l));
  fs.unlinkSync(file);
  check(lines.some((l) => l.event === "tool_call" && l.tool === "weather_report") &&
        lines[lines.length - 1].event === "stopped", "the transcript downloads (" + lines.length + " events)");

  // 2. A clarify: the question with a box; the run resumes with the answer.
  await ask(page, "What is the weather?");
  await page.waitForSelector(".clarify >> text=Which city?");
  check(true, "the model's question is shown with a box to answer it");
  await page.fill(".clarify input", "Oslo");
  await page.press(".clarify input", "Enter");
  await page.waitForSelector(".exchange:nth-of-type(2) .answer strong >> text=Oslo");
  await settled(page, 20000);
  const answered = await page.textContent(".exchange:nth-of-type(2) .steps");
  check(answered.includes("Which city?") && answered.includes("You answered") && answered.includes("Oslo"),
        "the question stays in the history and the run resumed with the answer");
  if (shots) {
    await page.setViewportSize({ width: 1100, height: 1500 });
    await page.screenshot({ path: path.join(shots, "web-desktop.png") });
    await page.setViewportSize({ width: 1100, height: 800 });
  }

  // 3. A run held in a hanging tool ends at once with Stop.
  await ask(page, "Look up the answer");
  await page.waitForSelector(".exchange:nth-of-type(3) .step.call >> text=slow_lookup");
  const t0 = Date.now();
  await page.click("#stop");
  await page.waitForSelector(".exchange:nth-of-type(3) .step >> text=Stopped.", { timeout: 10000 });
  await settled(page, 10000);
  check(Date.now() - t0 < 5000, `stop ended the run in ${Date.now() - t0} ms`);

  // The history is kept across questions, and Start over clears it.
  const exchanges = await page.locator(".exchange").count();
  check(exchanges === 3, "three exchanges in the conversation");
  if (shots) {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.screenshot({ path: path.join(shots, "web-phone.png"), fullPage: false });
    const wide = await page.evaluate(() => document.documentElement.scrollWidth);
    check(wide <= 390, `readable at a phone's width (page is ${wide}px wide)`);
  }
  await page.click("#reset");
  await page.waitForFunction(() => document.querySelectorAll(".exchange").length === 0, null, { timeout: 5000 });
  check(true, "start over clears the conversation");
}

async function real(page) {
  await ask(page, "What is 12.5 * 4?");
  // The footer is written when the run ends (tokens and timings, or the error).
  await page.waitForSelector(".exchange:nth-of-type(1) .footer:not(:empty)", { timeout: 240000 });
  const text = await page.textContent(".exchange:nth-of-type(1)");
  const labels = await page.$$eval(".exchange:nth-of-type(1) .step .label", (ls) => ls.map((l) => l.textContent));
  console.log("steps: " + labels.join(", "));
  console.log("answer: " + (await page.textContent(".exchange:nth-of-type(1) .answer")));
  console.log("footer: " + (await page.textContent(".exchange:nth-of-type(1) .footer")));
  check(labels.includes("Thinking"), "the model's work is shown");
  check(/50/.test(text), "the answer (50) appears");
  const footer = await page.textContent(".exchange:nth-of-type(1) .footer");
  check(/tokens/.test(footer), "tokens and timings are shown: " + footer);
  await noScriptRan(page);
  if (shots) await page.screenshot({ path: path.join(shots, "web-real-model.png") });
}

(async () => {
  const browser = await chromium.launch({
    executablePath: process.env.TOOLLOOP_CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  let failed = false;
  try {
    const context = await browser.newContext({ viewport: { width: 1100, height: 800 }, acceptDownloads: true });
    const page = await context.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
    await page.goto(url);
    if (scenario === "scripted") await scripted(page);
    else await real(page);
    const csp = errors.filter((e) => /Content Security Policy/i.test(e));
    check(csp.length === 0, "nothing was refused by the page's security policy: " + csp.join("; "));
    const own = errors.filter((e) => !/Content Security Policy|Failed to load resource/i.test(e));
    check(own.length === 0, "no script errors in the page: " + own.join("; "));
  } catch (e) {
    console.error("FAILED: " + e.message);
    failed = true;
  } finally {
    await browser.close();
  }
  process.exit(failed ? 1 : 0);
})();
