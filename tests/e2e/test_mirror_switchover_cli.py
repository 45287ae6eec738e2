"""`lakemirror mirror switchover|promote` as processes against two regions' servers and replicants.

Region ``a`` holds the source; region ``b``'s replicant mirrors it. ``switchover`` promotes the
mirror on ``b``'s replicant and makes ``a``'s repository its mirror through ``a``'s replicant,
each region signed in with its own administrator's key (one client configuration per region).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import lakefs
import yaml

from tests.e2e.failover import Failover, make_user
from tests.e2e.regions import MIRRORS, Region, TwoRegions, wait_for
from tests.integration.harness import unique


def _client_config(tmp: Path, region: Region) -> Path:
    path = tmp / f"lakectl-{region.name}.yaml"
    server = region.server
    data = {
        "server": {"endpoint_url": server.url},
        "credentials": {
            "access_key_id": server.access_key_id,
            "secret_access_key": server.secret_access_key,
        },
    }
    path.write_text(yaml.safe_dump(data))
    return path


def _cli(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKECTL_")}
    env["HOME"] = str(tmp)  # no ~/.lakectl.yaml of the machine
    command = [sys.executable, "-m", "mirror.cli.main", "mirror", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)


def _audit(region: Region, **filters: str) -> list[dict[str, Any]]:
    """Return a region's audit events the filters match, newest first."""
    answer = region.http.get("/audit", params={**filters, "amount": 1000})
    assert answer.status_code == 200, answer.text
    return list(answer.json()["results"])


def _commit(region: Region, repo: str, path: str, data: bytes) -> str:
    branch = lakefs.Repository(repo, client=region.client).branch("main")
    branch.object(path).upload(data=data)
    return str(branch.commit(message=f"add {path}").get_commit().id)


def test_switchover_moves_the_writable_role_and_reverses_mirroring(
    world: TwoRegions, tmp_path: Path
) -> None:
    fo = Failover(world)
    source, source_ns = world.source_repo("sw")
    mirror = unique("sw-mirror")
    head = _commit(world.a, source.id, "one.csv", b"1" * 1000)
    fo.replicate("a", source_ns, "b", world.b.namespace(mirror))
    config_a, config_b = _client_config(tmp_path, world.a), _client_config(tmp_path, world.b)
    try:
        with fo.replicant("b") as rb, fo.replicant("a") as ra:
            assert fo.mirror(rb, source.id, mirror).status_code == 201
            wait_for(lambda: fo.synced(rb, source.id, mirror, "main"), 60, "the mirror synced")
            promote = MIRRORS.format(repo=source.id) + f"/{mirror}/promote"
            # refused before anything happens: no credentials, no permission, no such mirror
            anonymous = httpx.post(rb.url + promote, json={}, timeout=30)
            assert anonymous.status_code == 401
            reader = make_user(world.b, "FSReadAll")
            assert fo.promote(rb, source.id, mirror, auth=reader).status_code == 403
            unknown = rb.http.post(MIRRORS.format(repo=source.id) + "/nowhere/promote", json={})
            assert unknown.status_code == 404
            fo.replicate("b", world.b.namespace(mirror), "a", source_ns)

            result = _cli(
                tmp_path,
                "switchover",
                source.id,
                mirror,
                "--to-replicant",
                rb.url,
                "--to-config",
                str(config_b),
                "--from-replicant",
                ra.url,
                "--from-config",
                str(config_a),
                "--timeout",
                "60",
                "-o",
                "json",
            )
            assert result.returncode == 0, result.stderr
            out = json.loads(result.stdout)
            report, reverse = out["promotion"], out["reverse_mirror"]
            assert report["forced"] is False and report["heads"] == {"main": head}
            assert report["source"] == f"a/{source.id}" and report["missing"] == {}
            assert report["writes_refused_seconds"] > 0
            assert reverse["name"] == source.id and reverse["source_region"] == "b"
            assert reverse["adopted"] is True and reverse["preserved"] == []
            assert rb.metric("lakemirror_promotions_total", mirror=mirror, kind="planned") == 1
            refused = rb.metric("lakemirror_switchover_writes_refused_seconds", mirror=mirror)
            assert refused == report["writes_refused_seconds"]

            # writes go to b now; a refuses them and follows b as a mirror
            assert world.a.http.get(f"/repositories/{source.id}").json()["read_only"] is True
            after = _commit(world.b, mirror, "two.csv", b"2" * 500)
            wait_for(lambda: world.a.head(source.id, "main") == after, 60, "a following b")
            got = world.a.http.get(
                f"/repositories/{source.id}/refs/main/objects", params={"path": "two.csv"}
            )
            assert got.content == b"2" * 500

            again = _cli(
                tmp_path, "promote", source.id, mirror, "--replicant", rb.url, "-c", str(config_b)
            )
            assert again.returncode == 5 and "already promoted at" in again.stderr
            twice = _cli(
                tmp_path,
                "adopt",
                mirror,
                source.id,
                "--replicant",
                ra.url,
                "--region",
                "a",
                "-c",
                str(config_a),
            )
            assert twice.returncode == 5 and "already exists" in twice.stderr

            # each region's audit trail: who moved the role and from where, refusals included
            in_b = _audit(world.b, repository=mirror)
            promotions = [e for e in in_b if e["kind"] == "mirror.promote"]
            assert [e["result"] for e in promotions] == ["failure", "success"]
            refused, promoted = promotions
            assert refused["status"] == 409 and "already promoted" in refused["message"]
            assert promoted["actor"]["access_key_id"] == world.b.server.access_key_id
            assert promoted["actor"]["via"] == "replicant"
            assert promoted["target"]["source_repository"] == source.id
            assert promoted["details"] == {"force": False, "timeout": 60.0}
            assert promoted["after"]["forced"] is False
            assert promoted["after"]["source"] == f"a/{source.id}"
            [made_writable] = [e for e in in_b if e["kind"] == "repository.promote"]
            assert made_writable["actor"]["access_key_id"] == world.replicator_key[0]
            assert made_writable["before"] == {"read_only": True, "mirror_of": f"a/{source.id}"}
            assert {"mirror.create", "repository.create"} <= {e["kind"] for e in in_b}
            unknown_promotion = _audit(world.b, repository="nowhere", kind="mirror.promote")
            assert unknown_promotion[0]["status"] == 404
            in_a = _audit(world.a, repository=source.id)
            demotions = [e for e in in_a if e["kind"] == "repository.demote"]
            assert all(e["result"] == "success" for e in demotions)
            assert all(e["after"]["read_only"] is True for e in demotions)
            # the planned promotion demoted the source first, with the key b's replicant holds
            # for a (the adoption, later, again with a's replicator)
            assert demotions[-1]["actor"]["access_key_id"] == world.a.server.access_key_id
            adoptions = [e for e in in_a if e["kind"] == "mirror.adopt"]
            assert [e["result"] for e in adoptions] == ["failure", "success"]
            assert adoptions[1]["target"]["source_repository"] == mirror
            assert adoptions[1]["after"]["adopted"] is True
    finally:
        fo.close()


def test_copy_preserved_waits_for_the_files_then_copies_the_branch(
    world: TwoRegions, tmp_path: Path
) -> None:
    fo = Failover(world)
    kept, kept_ns = world.source_repo("kept")
    head = _commit(world.a, kept.id, "late.csv", b"L" * 700)
    branch = "preserved-main-20261124T120000"
    created = world.a.http.post(
        f"/repositories/{kept.id}/branches", json={"name": branch, "source": "main"}
    )
    assert created.status_code == 201, created.text
    target = unique("new-source")
    target_ns = world.b.namespace(target)
    made = world.b.http.post("/repositories", json={"name": target, "storage_namespace": target_ns})
    assert made.status_code == 201, made.text
    config_b = _client_config(tmp_path, world.b)
    args = [
        "copy-preserved",
        target,
        branch,
        "--from-region",
        "a",
        "--from-repository",
        kept.id,
        "-c",
        str(config_b),
    ]
    try:
        with fo.replicant("b") as rb:
            early = _cli(tmp_path, *args, "--replicant", rb.url)
            assert early.returncode == 5 and "not in" in early.stderr and "yet" in early.stderr
            assert world.b.head(target, branch) is None
            sim = fo.replicate("a", kept_ns, "b", target_ns, start=False)
            sim.run_until_idle(timeout=30)
            done = _cli(tmp_path, *args, "--replicant", rb.url, "-o", "json")
            assert done.returncode == 0, done.stderr
            copied = json.loads(done.stdout)
            assert copied["head"] == head and copied["source"] == f"a/{kept.id}"
            assert copied["commits"][-1] == head
            assert world.b.head(target, branch) == head
            got = world.b.http.get(
                f"/repositories/{target}/refs/{branch}/objects", params={"path": "late.csv"}
            )
            assert got.content == b"L" * 700
    finally:
        fo.close()
