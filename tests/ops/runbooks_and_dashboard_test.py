#!/usr/bin/env python3
"""The operator's files agree with each other, with no server needed (a second or two):

- every rule of packaging/prometheus/verdict.rules.yml has a runbook_url, docs/operating.md#ALERT
  (the alert's name in lower case), and docs/operating.md has the heading that anchor names;
- packaging/grafana/verdict-dashboard.json has job and instance variables, and every query
  selects by both, uses $__rate_interval rather than a fixed window, and has a legend that names
  what tells its series apart (the instance, and each label it keeps by), distinct in its panel;
- every dashboard query is PromQL that promtool accepts.

Each check is first shown to catch a made-up fault.
    runbooks_and_dashboard_test.py SOURCE_DIR
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

source = sys.argv[1]
rules_path = os.path.join(source, "packaging/prometheus/verdict.rules.yml")
docs_path = os.path.join(source, "docs/operating.md")
dashboard_path = os.path.join(source, "packaging/grafana/verdict-dashboard.json")
failures = []


def fail(message):
    failures.append(message)
    print("FAIL " + message)


def slug(heading):
    """The anchor GitHub (and most Markdown renderers) give a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors_of(markdown):
    found = set()
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and (m := re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)):
            found.add(slug(m.group(1)))
    return found


def runbook_faults(rules, anchors):
    faults = []
    for group in rules["groups"]:
        for rule in group["rules"]:
            name = rule.get("alert") or rule.get("record")
            url = rule.get("annotations", {}).get("runbook_url", "")
            if not url:
                faults.append(f"{name}: no runbook_url")
                continue
            path, _, anchor = url.partition("#")
            if path != "docs/operating.md":
                faults.append(f"{name}: runbook_url {url} is not in docs/operating.md")
            if rule.get("alert") and anchor != rule["alert"].lower():
                faults.append(f"{name}: runbook_url {url} is not the alert's own heading")
            if anchor not in anchors:
                faults.append(f"{name}: docs/operating.md has no heading for #{anchor}")
    return faults


rules = yaml.safe_load(open(rules_path))
anchors = anchors_of(open(docs_path).read())
# The control: a rule whose heading is missing is caught.
made_up = {"groups": [{"rules": [{"alert": "VerdictNoSuchAlert",
                                  "annotations": {"runbook_url": "docs/operating.md#verdictnosuchalert"}}]}]}
if not runbook_faults(made_up, anchors):
    fail("a runbook_url without its heading in docs/operating.md was not caught")
for fault in runbook_faults(rules, anchors):
    fail(fault)
alerts = [r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r]
print(f"runbook_url: {len(alerts)} rules, each with its heading in docs/operating.md")

# --- the dashboard
METRIC = re.compile(r"\b((?:verdict|process)_[a-z0-9_]+|up)\b(?!\s*\()")
SELECTOR = '{job=~"$job",instance=~"$instance"'


def query_faults(expr, legend):
    faults = []
    for m in METRIC.finditer(expr):
        # A name inside by (...) or braces is a label, not a metric.
        before = expr[:m.start()]
        if before.count("{") > before.count("}") or re.search(r"by\s*\([^)]*$", before):
            continue
        if not expr[m.end():].startswith(SELECTOR):
            faults.append(f"{m.group(1)} is not selected by job and instance: {expr}")
    for window in re.findall(r"\[([^\]]*)\]", expr):
        if window != "$__rate_interval":
            faults.append(f"a fixed window [{window}] instead of [$__rate_interval]: {expr}")
    kept = re.findall(r"by\s*\(([^)]*)\)", expr)
    labels = {l.strip() for l in kept[0].split(",")} - {"le"} if kept else {"instance"}
    for label in sorted(labels):
        if "{{" + label + "}}" not in legend:
            faults.append(f"legend {legend!r} does not name {label}: {expr}")
    return faults


if not query_faults("sum by (instance, code) (rate(verdict_lobby_settlements_total[5m]))",
                    "{{instance}}"):
    fail("a query with no job or instance selector, a fixed window and a vague legend passed")

dashboard = json.load(open(dashboard_path))
variables = {v["name"]: v for v in dashboard["templating"]["list"]}
for name in ("job", "instance"):
    v = variables.get(name)
    if not v or v.get("type") != "query" or not v.get("multi") or not v.get("includeAll"):
        fail(f"no multi-value query variable ${name} with All")
if "instance" in variables and "$job" not in variables["instance"].get("query", ""):
    fail("the instance variable does not follow the job chosen")

exprs = []
for panel in dashboard["panels"]:
    legends = []
    for target in panel.get("targets", []):
        expr, legend = target.get("expr", ""), target.get("legendFormat", "")
        exprs.append(expr)
        legends.append(legend)
        for fault in query_faults(expr, legend):
            fail(f"panel {panel['title']!r}: {fault}")
    if len(set(legends)) != len(legends):
        fail(f"panel {panel['title']!r}: its series cannot be told apart: legends {legends}")
print(f"dashboard: {len(dashboard['panels'])} panels, {len(exprs)} queries checked")


# Every query is PromQL: promtool checks them as recording rules, with the variables filled in.
def promtool_accepts(queries):
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query{i}",
         "expr": q.replace("$__rate_interval", "5m").replace("$job", "verdict-node")
                  .replace("$instance", "n1:9464")} for i, q in enumerate(queries)]}]}
    with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
        yaml.safe_dump(rules, f)
        f.flush()
        run = subprocess.run(["promtool", "check", "rules", f.name], capture_output=True, text=True)
    return run.returncode == 0, run.stdout + run.stderr


if promtool_accepts(["sum by (instance (up)"])[0]:
    fail("promtool accepted a query that is not PromQL")
ok, output = promtool_accepts(exprs)
if not ok:
    fail("promtool refuses dashboard queries:\n" + output)

sys.exit(1 if failures else 0)
