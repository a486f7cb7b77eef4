// The page in a real headless Chromium (Debian's), driven by playwright-core.
//   node tests/web/e2e.cjs scripted[:phone]|real URL
// `scripted` expects tests/web.rs's scripted server: a hostile tool result and answer,
// a clarify, a run that hangs in a tool, one whose model never answers, one a check
// asks again, and two calls started early; at a
// desktop's size, or a phone's (390×844) with `:phone`. `real` asks a real model one
// question.
// TOOLLOOP_SCREENSHOTS=DIR saves the page at a desktop's and a phone's width.
// Exits non-zero with a message at the first thing that is not as it should be.
"use strict";
const path = require("path");
const fs = require("fs");
const os = require("os");
const { chromium } = require(path.join(process.env.TOOLLOOP_PLAYWRIGHT, "playwright-core"));

const [scenarioArg, url] = process.argv.slice(2);
const [scenario, size = "desktop"] = scenarioArg.split(":");
const VIEWPORT = size === "phone" ? { width: 390, height: 844 } : { width: 1100, height: 800 };
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

// Whether the element is in view: below the sticky header, above the sticky input bar.
async function inView(page, selector) {
  return page.evaluate((sel) => {
    const els = document.querySelectorAll(sel);
    const r = els[els.length - 1].getBoundingClientRect();
    const top = document.querySelector("header").getBoundingClientRect().bottom;
    const bottom = document.querySelector("form#ask").getBoundingClientRect().top;
    return { ok: r.height > 0 && r.top >= top - 1 && r.bottom <= bottom + 1, top: r.top, bottom: r.bottom, between: [top, bottom] };
  }, selector);
}

async function scripted(page) {
  // The first screen offers questions the tools can answer; one click asks it.
  await page.waitForSelector("#suggestions button >> text=What is the weather in Paris?");
  check(await page.isVisible("#welcome"), "the first screen offers questions from the tools' examples");

  // 1. A tool call, its result, the answer; all hostile Markdown made harmless.
  await page.click("#suggestions button >> text=What is the weather in Paris?");
  await page.waitForSelector(".exchange:nth-of-type(1) .user >> text=What is the weather in Paris?");
  check(await page.isHidden("#welcome"), "the suggestion was asked and the first screen gave way");
  await page.waitForSelector(".exchange:nth-of-type(1) .step.call >> text=weather_report");
  // weather_report declares nothing, so it is taken as destructive: the run waits for the
  // person's word in a card, and the call runs once they say yes.
  await page.waitForSelector(".exchange:nth-of-type(1) .approval >> text=Run weather_report?");
  const card = await page.textContent(".exchange:nth-of-type(1) .approval");
  check(card.includes("destructive") && card.includes('"city": "Paris"'),
        "a call that may change things waits in a card with its class and arguments");
  check(!card.includes("Not in what you wrote"), "a value the person said is not marked");
  await page.click(".exchange:nth-of-type(1) .approval button[data-answer=yes]");
  await page.waitForSelector(".exchange:nth-of-type(1) .step >> text=Allowed");
  check(await page.locator(".exchange:nth-of-type(1) .approval button").count() === 0,
        "once answered, the card's choices are gone");
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

  // The newest answer is in view, not under the input bar, on a page taller than the
  // window.
  const tall = await page.evaluate(() => document.documentElement.scrollHeight - window.innerHeight);
  check(tall > 0, `the conversation is taller than the window (by ${tall}px)`);
  const seen = await inView(page, ".exchange:nth-of-type(2) .answer");
  check(seen.ok, "the newest answer is in view: " + JSON.stringify(seen));

  // The Tools panel opens in view wherever the page is scrolled.
  await page.click("#tools-toggle");
  await page.waitForSelector("#tool-list li >> text=get_weather");
  const panel = await page.evaluate(() => {
    const r = document.querySelector("#tool-list").getBoundingClientRect();
    return { top: r.top, bottom: r.bottom, scrolled: window.scrollY, height: window.innerHeight };
  });
  check(panel.scrolled > 0 && panel.top >= 0 && panel.top < panel.height,
        "the Tools panel opens in view on a scrolled page: " + JSON.stringify(panel));
  await page.click("#tools-toggle");
  if (shots) await page.screenshot({ path: path.join(shots, `web-${size}.png`) });

  // A reload shows the conversation again.
  await page.reload();
  await page.waitForSelector(".exchange:nth-of-type(2) .answer strong >> text=Oslo");
  check(await page.locator(".exchange").count() === 2 && await page.isHidden("#welcome"),
        "a reload restores the conversation from the server");
  const restored = await page.textContent(".exchange:nth-of-type(1)");
  check(restored.includes("weather_report") && restored.includes("sunny"), "with its steps and answers");

  // 3. A run held in a hanging tool: a reload in the middle keeps it, and Stop ends it at
  // once. A person who scrolled up to read is not pulled down by new steps.
  await ask(page, "Look up the answer");
  await page.waitForSelector(".exchange:nth-of-type(3) .step.call >> text=slow_lookup");
  await page.waitForSelector(".exchange:nth-of-type(3) .approval >> text=Not in what you wrote: query, limit");
  check(true, "the card names the values the person never said");
  await page.click(".exchange:nth-of-type(3) .approval button[data-answer=without] >> text=Without limit");
  await page.waitForSelector(".exchange:nth-of-type(3) .step >> text=run without limit");
  check(true, "the call runs without the optional value nobody said");
  await page.reload();
  await page.waitForSelector(".exchange:nth-of-type(3) .step.call >> text=slow_lookup");
  await page.waitForSelector("#stop", { state: "visible" });
  check(true, "a reload mid-run shows the run in progress, with Stop");
  await page.evaluate(() => window.scrollTo(0, 0));
  let t0 = Date.now();
  await page.click("#stop");
  await page.waitForSelector(".exchange:nth-of-type(3) .step >> text=Stopped.", { timeout: 10000 });
  await settled(page, 10000);
  check(Date.now() - t0 < 3000, `stop ended the run held in a tool in ${Date.now() - t0} ms`);
  const y = await page.evaluate(() => window.scrollY);
  check(y < 5, `the page stayed where the person scrolled to (scrollY ${y})`);

  // 4. A run whose model has not answered yet: Stop ends it within about a second.
  await ask(page, "Anything at all");
  await page.waitForSelector(".exchange:nth-of-type(4) .step.thinking");
  await page.waitForTimeout(500);
  t0 = Date.now();
  await page.click("#stop");
  await page.waitForSelector(".exchange:nth-of-type(4) .step >> text=Stopped.", { timeout: 10000 });
  await settled(page, 10000);
  check(Date.now() - t0 < 2000, `stop ended the run waiting on the model in ${Date.now() - t0} ms`);
  const footer4 = await page.textContent(".exchange:nth-of-type(4) .footer");
  check(!/timed out|error/i.test(footer4), "ended as stopped, not as an error: " + footer4);

  // The history is kept across questions, and Start over clears it.
  const exchanges = await page.locator(".exchange").count();
  check(exchanges === 4, "four exchanges in the conversation");
  const wide = await page.evaluate(() => document.documentElement.scrollWidth);
  check(wide <= VIEWPORT.width, `nothing wider than the window (page is ${wide}px wide)`);
  await page.click("#reset");
  await page.waitForFunction(() => document.querySelectorAll(".exchange").length === 0, null, { timeout: 5000 });
  check(await page.isVisible("#welcome"), "start over clears the conversation and offers the questions again");
  await page.reload();
  await page.waitForSelector("#suggestions button");
  check(await page.locator(".exchange").count() === 0, "and a reload after it stays empty");

  // 5. What a check does is on the page: asked again for the place the call left out,
  // the model wrote no turn, and the first call went ahead.
  await ask(page, "What is the weather at 75001 and at 10001?");
  // The footer is written when the run ends.
  await page.waitForSelector(".exchange:nth-of-type(1) .footer:not(:empty)", { timeout: 10000 });
  const checked = await page.textContent(".exchange:nth-of-type(1) .steps");
  check(checked.includes("Asked for more calls (numbers-left)") && checked.includes("left out 10001"),
    "the asking is shown with the number the call left out");
  check(checked.includes("Kept the first calls (numbers-left)") && checked.includes("going ahead with the 1 call made first"),
    "the failed asking is shown, and the first call kept");
  const labels5 = await page.$$eval(".exchange:nth-of-type(1) .step .label", (ls) => ls.map((l) => l.textContent));
  const kept = labels5.findIndex((l) => l.startsWith("Kept the first calls"));
  const call5 = labels5.findIndex((l, i) => i > kept && l === "Tool call");
  check(kept >= 0 && call5 > kept, "then the call runs: " + labels5.join(", "));
  const answer5 = await page.textContent(".exchange:nth-of-type(1) .answer");
  check(answer5.includes("Sunny at 75001."), "and the answer follows");

  // 6. Two calls of a tool that only reads: the thinking step names each as it is
  // written, each is started early, and then the turn's calls and results follow.
  await ask(page, "What is the weather in Paris and in Rome?");
  await page.waitForSelector(".exchange:nth-of-type(2) .footer:not(:empty)", { timeout: 10000 });
  const wrote = await page.textContent(".exchange:nth-of-type(2) .step.thinking .wrote");
  check(wrote === "wrote get_weather, get_weather", "the calls are named as they are written: " + wrote);
  const labels6 = await page.$$eval(".exchange:nth-of-type(2) .step .label", (ls) => ls.map((l) => l.textContent));
  const early = labels6.filter((l) => l === "Started early").length;
  const firstCall = labels6.indexOf("Tool call");
  check(early === 2 && labels6.lastIndexOf("Started early") < firstCall,
    "both calls are started early, before the turn's calls: " + labels6.join(", "));
  const answer6 = await page.textContent(".exchange:nth-of-type(2) .answer");
  check(answer6.includes("Sunny in Paris and in Rome."), "and the answer follows");

  // 7. An answer that writes back toolloop's own instruction to the model is withdrawn,
  // and the page says why the run has no answer.
  await ask(page, "How much flour for 6 loaves?");
  await page.waitForSelector(".exchange:nth-of-type(3) .footer:not(:empty)", { timeout: 10000 });
  const steps7 = await page.textContent(".exchange:nth-of-type(3) .steps");
  const answer7 = await page.textContent(".exchange:nth-of-type(3) .answer");
  check(!answer7.includes("Answer directly"), "the instruction is not left as the answer: " + answer7);
  check(steps7.includes("Answer withdrawn") && steps7.includes("toolloop's instruction"),
    "the page says it was withdrawn and why: " + steps7);
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
    const context = await browser.newContext({ viewport: VIEWPORT, acceptDownloads: true });
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
