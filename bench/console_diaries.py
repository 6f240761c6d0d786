"""Benchmark the console's diary pages (issue 24) on a diary of 10 000 entries: server time of
each page as the page reports it (`Server-Timing: app;dur=`), for a logged-in human member.

    .venv/bin/python bench/console_diaries.py [--entries 10000] [--runs 30] [--quick]

Starts the embedded stack (bench/_stack.py) and sets up as bench/map.py does: a team, a diary,
`--real` entries written through the API and the rest COPY'd into `diary_entries` (real CIDs,
synthetic embeddings), a human member logged in. Measured, one client, `--runs` each:

- the team's diaries page; the diary page, first page and the last (offset near 10 000: the
  deepest the *Older* link goes); an entry page (content, relations, signature check); the
  entry edit page; the search page (hybrid: the query embedded, vector plus full text).

Target (issue 24): every page's server p95 ≤ 300 ms. Writes bench/results/console_diaries.json.
"""

from __future__ import annotations

import argparse
import platform
import re
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._stack import BenchStack, register_agent, run_and_report
from bench.map import Seeder, call, setup, summary

RESULTS = Path(__file__).resolve().parent / "results" / "console_diaries.json"
TARGET_P95_MS = 300.0
APP_TIMING = re.compile(r"app;dur=([0-9.]+)")


def log(message: str) -> None:
    print(f"[console-diaries-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr)


async def server_ms(session: aiohttp.ClientSession, url: str, cookie: dict[str, str]) -> float:
    """The page's own server time (its Server-Timing), after checking it answered 200."""
    async with session.get(url, headers=cookie, allow_redirects=False) as response:
        await response.read()
        assert response.status == 200, (url, response.status)
        timing = APP_TIMING.search(response.headers.get("Server-Timing", ""))
    assert timing is not None, url
    return float(timing.group(1))


async def run(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {
        "benchmark": "console_diaries",
        "params": {"entries": args.entries, "real": args.real, "runs": args.runs},
        "env": {"python": platform.python_version(), "machine": platform.machine()},
        "seeding": f"{args.real} entries through the API, the rest COPY'd into diary_entries",
    }
    async with BenchStack(keep_dir=args.keep_dir) as stack:
        result["topology"] = stack.topology()
        base = stack.base_url
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as session:
            agent = await register_agent(session, stack)
            log(f"team, diary, human, {args.real} entries through the API")
            team_id, diary_id, token = await setup(session, base, agent, args.real)
            async with Seeder(stack.settings.database_url, diary_id, agent.agent_id) as seeder:
                log(f"seeding {args.entries - args.real} entries")
                await seeder.seed(args.entries - args.real)
            listed = await call(session, "GET", f"{base}/diaries/{diary_id}/entries", agent.headers)
            entry_id = listed["items"][0]["id"]
            last = (listed["total"] - 1) // 50 * 50
            cookie = {"Cookie": f"cairn_session={token}"}
            pages = {
                "team_diaries": f"{base}/console/teams/{team_id}/diaries",
                "diary_first_page": f"{base}/console/diaries/{diary_id}",
                "diary_last_page": f"{base}/console/diaries/{diary_id}?offset={last}",
                "entry": f"{base}/console/entries/{entry_id}",
                "entry_edit": f"{base}/console/entries/{entry_id}/edit",
                "search": f"{base}/console/diaries/{diary_id}/search?q=caching+deploys",
            }
            measured: dict[str, Any] = {}
            for name, url in pages.items():
                log(name)
                await server_ms(session, url, cookie)  # warm: the first read of a plan
                samples = [await server_ms(session, url, cookie) for _ in range(args.runs)]
                measured[name] = summary(samples)
            result["entries_in_diary"] = listed["total"]
            result["pages_server"] = measured
    result["targets"] = {
        name: {
            "target_p95_ms": TARGET_P95_MS,
            "measured_p95_ms": figures["p95_ms"],
            "met": figures["p95_ms"] <= TARGET_P95_MS,
        }
        for name, figures in result["pages_server"].items()
    }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--real", type=int, default=20, help="entries written through the API")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="10 runs")
    parser.add_argument("--keep-dir", action="store_true")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.runs = 10
    run_and_report(run(args), args.output)


if __name__ == "__main__":
    main()
