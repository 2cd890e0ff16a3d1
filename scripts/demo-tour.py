#!/usr/bin/env python3
"""The demo after ten minutes (docs/dashboards.md): starts `serve --demo` and
Debian's prometheus with the shipped rules (dashboards/prometheus/rules.yml,
unmodified; 15 s scrape and evaluation) on free local ports in a temporary
directory, waits --minutes (10), then runs every panel query of
dashboards/*.json with each variable at its default (as resolveVariables and
interpolate in e2e/dashboards_e2e_test.go set them), instant and over the run
at a 15 s step, and prints per dashboard each panel's value now and its
min..max over the run, every alert pending or firing at any evaluation of the
run, and the machine, date and commit. Stops both processes on exit.

usage: scripts/demo-tour.py [BIN] [--minutes 10]   (make demo-tour)
Standard library only."""
import argparse, glob, json, math, os, re, signal, socket, subprocess, sys
import tempfile, time, urllib.parse, urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEP = 15
# the dashboards' default range as Grafana queries it (e2e: dashRange,
# dashStep, rateInterval)
DASH_RANGE, DASH_STEP, RATE_INTERVAL = 7 * 24 * 3600, 600, "615s"
HIDDEN = ("job", "instance", "slurm_cluster")  # one value each in the demo
MAX_SERIES = 24  # a target with more series shows its 5 highest and 5 lowest


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prom:
    def __init__(self, url):
        self.url = url

    def api(self, path, **params):
        u = self.url + path + "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(u, timeout=60) as r:
            body = json.load(r)
        if body["status"] != "success":
            raise RuntimeError(f"{path} {params}: {body.get('error')}")
        return body["data"]

    def query(self, q, t):
        return self.api("/api/v1/query", query=q, time=t)["result"]

    def query_range(self, q, start, end):
        return self.api("/api/v1/query_range", query=q, start=start, end=end, step=STEP)["result"]


# --- the variables, as e2e/dashboards_e2e_test.go resolves them ----------

VAR_REF = re.compile(r"\$(\w+)|\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]")
SPECIAL = re.compile(r"[\\^$*+?.()|{}\[\]]")
LABEL_VALUES = re.compile(r"^\s*label_values\((?:(.*),\s*)?(\w+)\)\s*$", re.S)
QUERY_RESULT = re.compile(r"^\s*query_result\((.*)\)\s*$", re.S)


def interpolate(expr, values, defs):
    def rep(m):
        name = m.group(1) or m.group(2) or m.group(3)
        fixed = {"__rate_interval": RATE_INTERVAL, "__interval": f"{DASH_STEP}s", "__range": f"{DASH_RANGE}s"}
        if name in fixed:
            return fixed[name]
        if name not in values:
            return m.group(0)
        v, d = values[name], defs[name]
        if v == "$__all":
            return d.get("allValue") or ""
        if not d.get("multi") and not d.get("includeAll"):
            return v.replace("\\", "\\\\").replace("'", "\\'")
        return SPECIAL.sub(lambda x: "\\\\" + x.group(0), v)
    return VAR_REF.sub(rep, expr)


def variable_values(prom, q, end):
    m = LABEL_VALUES.match(q)
    if m:
        params = {"start": end - DASH_RANGE, "end": end}
        if m.group(1):
            params["match[]"] = m.group(1)
        return prom.api(f"/api/v1/label/{m.group(2)}/values", **params)
    m = QUERY_RESULT.match(q)
    if m:
        out = []
        for s in prom.query(m.group(1), end):
            labels = sorted(f'{k}="{v}"' for k, v in s["metric"].items() if k != "__name__")
            out.append(f'{s["metric"].get("__name__", "")}{{{",".join(labels)}}} {s["value"][1]} {int(s["value"][0] * 1000)}')
        return out
    raise RuntimeError(f"variable query {q!r}: neither label_values nor query_result")


def apply_regex(values, regex):
    body = regex[1:]
    i = body.rindex("/")
    r = re.compile(body[:i], re.I if "i" in body[i + 1:] else 0)
    out = []
    for v in values:
        m = r.search(v)
        if m:
            v = m.group(1) if m.groups() else m.group(0)
            if v not in out:
                out.append(v)
    return out


def sort_values(v, order):
    num = lambda s: int(re.search(r"\d+", s).group(0)) if re.search(r"\d+", s) else -1
    keys = {1: (None, False), 2: (None, True), 3: (num, False), 4: (num, True),
            5: (str.lower, False), 6: (str.lower, True)}
    if not order:
        return v
    key, rev = keys[order]
    return sorted(v, key=key, reverse=rev)


def resolve_variables(prom, board, end):
    values, defs = {}, {}
    for v in board.get("templating", {}).get("list", []):
        defs[v["name"]] = v
        if v["type"] == "datasource":
            values[v["name"]] = "prometheus"
            continue
        q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        opts = variable_values(prom, interpolate(q, values, defs), end)
        if v.get("regex"):
            opts = apply_regex(opts, v["regex"])
        opts = sort_values(opts, v.get("sort"))
        if v.get("includeAll"):
            values[v["name"]] = "$__all"
        elif opts:
            values[v["name"]] = opts[0]
    return values, defs


# --- the tour ----------------------------------------------------------------

def panels(ps):
    for p in ps:
        if p.get("type") != "row":
            yield p
        yield from panels(p.get("panels", []))


def fmt(x):
    if x is None:
        return "-"
    if math.isinf(x) or math.isnan(x):
        return str(x)
    if abs(x) >= 1e4 or x == int(x):
        return f"{x:,.0f}"
    return f"{x:.4g}"


def mmss(t, start):
    return f"{int(t - start) // 60}:{int(t - start) % 60:02d}"


def labels(metric):
    name = metric.get("__name__", "")
    rest = ",".join(f'{k}="{v}"' for k, v in sorted(metric.items()) if k not in HIDDEN and k != "__name__")
    return name + ("{" + rest + "}" if rest or not name else "")


def target_summary(prom, expr, start, end):
    """One line per series: now, min..max over the run, and when it was
    seen if not all along."""
    now = {labels(s["metric"]): float(s["value"][1]) for s in prom.query(expr, end)}
    run = {}
    for s in prom.query_range(expr, start, end):
        ts, ys = [t for t, _ in s["values"]], [float(v) for _, v in s["values"]]
        run[labels(s["metric"])] = (min(ys), max(ys), ts[0], ts[-1], ts[ys.index(max(ys))])
    first = min((r[2] for r in run.values()), default=start)
    at = lambda t: mmss(t, start)
    keys = sorted(set(now) | set(run), key=lambda k: (-now.get(k, -math.inf), k))
    lines = []
    for k in keys:
        line = f"    {k or '{}'}  now {fmt(now.get(k))}"
        if k in run:
            lo, hi, t0, t1, tmax = run[k]
            line += "  run " + (f"{fmt(lo)} (flat)" if lo == hi else f"{fmt(lo)}..{fmt(hi)} (max at {at(tmax)})")
            if t0 > first + STEP or t1 < end - 2 * STEP:
                line += f", seen {at(t0)} to {at(t1)}"
        lines.append(line)
    if len(keys) > MAX_SERIES:
        vals = [now[k] for k in keys if k in now]
        lo = min(r[0] for r in run.values()) if run else None
        hi = max(r[1] for r in run.values()) if run else None
        head = (f"    {len(keys)} series ({len(vals)} now); now {fmt(min(vals, default=None))}..{fmt(max(vals, default=None))}"
                f" ({sum(v == 0 for v in vals)} at 0, {sum(math.isinf(v) for v in vals)} +Inf), run {fmt(lo)}..{fmt(hi)}"
                f" ({sum(r[0] == r[1] for r in run.values())} flat);"
                f" the 5 highest and lowest now:")
        lines = [head] + lines[:5] + ["    ..."] + lines[-5:]
    return lines or ["    no series"]


def tour(prom, start, end):
    for f in sorted(glob.glob(os.path.join(REPO, "dashboards", "*.json"))):
        board = json.load(open(f))
        values, defs = resolve_variables(prom, board, end)
        shown = " ".join(f"{k}={'All' if v == '$__all' else v}" for k, v in values.items() if defs[k]["type"] != "datasource")
        print(f"\n== {board['title']} ({os.path.basename(f)}): {shown}")
        for p in panels(board.get("panels", [])):
            print(f"  -- {p.get('title', '')}")
            for t in (t for t in p.get("targets", []) if t.get("expr")):
                expr = interpolate(t["expr"], values, defs)
                if len(p["targets"]) > 1:
                    print(f"   [{t.get('refId', '')}] {t.get('legendFormat', '') or expr}")
                print("\n".join(target_summary(prom, expr, start, end)))


def alerts(prom, start, end):
    run = math.ceil(end - start)
    res = prom.query(f"ALERTS[{run}s]", end)
    print(f"\n== Alerts pending or firing at any evaluation of the run (ALERTS[{run}s])")
    if not res:
        print("  none")
    for s in sorted(res, key=lambda s: s["values"][0][0]):
        ts = [t for t, _ in s["values"]]
        print(f"  {labels(s['metric'])}: {len(ts)} evaluations, {mmss(ts[0], start)} to {mmss(ts[-1], start)}")


def sh(*cmd):
    try:
        return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def machine(binary):
    """The machine, the commit and the versions, read before the run."""
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    dirty = " (with uncommitted changes)" if sh("git", "status", "--porcelain", "--untracked-files=no") else ""
    return (f"machine: {len(os.sched_getaffinity(0))} cores (nproc), {cpu}, Linux {os.uname().release}\n"
            f"   commit {sh('git', 'rev-parse', '--short', 'HEAD')}{dirty}; {sh(binary, '--version')};"
            f" {(sh('prometheus', '--version') or 'prometheus ?').splitlines()[0]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bin", nargs="?", default="./slurmdbd_exporter", help="the exporter binary (./slurmdbd_exporter)")
    ap.add_argument("--minutes", type=float, default=10, help="how long to run the demo before the tour (10)")
    args = ap.parse_args()
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started in the background
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    procs = []
    with tempfile.TemporaryDirectory(prefix="demo-tour.") as tmp:
        try:
            about = machine(os.path.abspath(args.bin))
            exp, pport = free_port(), free_port()
            with open(os.path.join(tmp, "prometheus.yml"), "w") as f:
                f.write(f"""global:
  scrape_interval: {STEP}s
  evaluation_interval: {STEP}s
rule_files: [{json.dumps(os.path.join(REPO, "dashboards", "prometheus", "rules.yml"))}]
scrape_configs:
  - job_name: slurmdbd_exporter
    static_configs:
      - targets: ['127.0.0.1:{exp}']
""")
            def start_proc(name, cmd):
                log = open(os.path.join(tmp, name + ".log"), "w")
                procs.append((name, subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True), log.name))
            start_proc("exporter", [args.bin, "serve", "--demo", "--web.listen-address", f"127.0.0.1:{exp}"])
            start = time.time()
            start_proc("prometheus", ["prometheus", "--config.file", os.path.join(tmp, "prometheus.yml"),
                                      "--storage.tsdb.path", os.path.join(tmp, "data"),
                                      "--web.listen-address", f"127.0.0.1:{pport}"])
            prom = Prom(f"http://127.0.0.1:{pport}")
            end = start + args.minutes * 60
            print(f"serve --demo on 127.0.0.1:{exp}, prometheus on {prom.url}; the tour at"
                  f" {time.strftime('%H:%M:%S', time.localtime(end))} (times below: min:s after serve started)", flush=True)
            while time.time() < end:
                for name, p, log in procs:
                    if p.poll() is not None:
                        raise RuntimeError(f"{name} exited ({p.returncode}):\n" + open(log).read()[-3000:])
                time.sleep(min(5, max(0, end - time.time())))
            end = time.time()
            tour(prom, start, end)
            alerts(prom, start, end)
            utc = lambda t: time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))
            print(f"\n== {about}\n   run: {utc(start)} to {utc(end)} UTC")
        finally:
            for name, p, _ in reversed(procs):
                if p.poll() is None:
                    p.terminate()
                    try:
                        p.wait(20)
                    except subprocess.TimeoutExpired:
                        p.kill()
                        p.wait()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
    except (OSError, RuntimeError) as e:
        sys.exit(f"demo-tour: {e}")
