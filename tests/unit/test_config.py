"""The process configuration: defaults, YAML file, LAKEMIRROR_* overrides, errors, `config show`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mirror.config import (
    REDACTED,
    ConfigurationError,
    LakeMirrorConfig,
    ServerSettings,
    load_config,
    redacted,
    with_overrides,
)
from mirror.logging import redact_secrets

SECRETS = ("s3-default-Zq81", "s3-eu-Wx72", "dynamo-Kp33", "admin-Tr55", "env-secret-Yu98")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.upper().startswith("LAKEMIRROR_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def write(path: Path, data: object) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def full_file(tmp_path: Path) -> Path:
    return write(
        tmp_path / "lakemirror.yaml",
        {
            "data_dir": str(tmp_path / "data"),
            "server": {"host": "0.0.0.0", "port": 9000},
            "kv": {
                "type": "dynamodb",
                "dynamodb": {
                    "table": "refs",
                    "region": "eu-west-1",
                    "endpoint_url": "http://127.0.0.1:5000",
                    "access_key_id": "AKIADYNAMO",
                    "secret_access_key": SECRETS[2],
                },
            },
            "blockstore": {
                "s3": {
                    "region": "us-east-1",
                    "access_key_id": "AKIAS3",
                    "secret_access_key": SECRETS[0],
                    "addressing_style": "path",
                    "regions": {
                        "eu-west-1": {
                            "endpoint_url": "http://127.0.0.1:5001",
                            "secret_access_key": SECRETS[1],
                        }
                    },
                }
            },
            "auth": {"admin_access_key_id": "AKIAADMIN", "admin_secret_access_key": SECRETS[3]},
            "logging": {"format": "JSON", "level": "debug"},
        },
    )


def test_defaults_need_no_file() -> None:
    config = load_config()
    assert config == LakeMirrorConfig()
    assert config.kv.type == "sqlite"
    assert config.data_dir == Path("lakemirror-data")
    assert config.sqlite_path() == Path("lakemirror-data/kv.sqlite")
    assert config.local_root() == Path("lakemirror-data")
    assert (config.server.host, config.server.port) == ("127.0.0.1", 8000)
    assert (config.logging.format, config.logging.level) == ("auto", "info")
    assert config.auth.admin_access_key_id is None


def test_yaml_file_sets_every_section(tmp_path: Path) -> None:
    config = load_config(full_file(tmp_path))
    assert config.server.port == 9000
    assert config.kv.type == "dynamodb"
    assert config.kv.dynamodb.table == "refs"
    assert config.kv.dynamodb.secret_access_key is not None
    assert config.kv.dynamodb.secret_access_key.get_secret_value() == SECRETS[2]
    assert config.blockstore.s3.addressing_style == "path"
    assert config.logging.format == "json"
    assert config.sqlite_path() == tmp_path / "data" / "kv.sqlite"
    eu = config.blockstore.s3.for_region("eu-west-1")
    assert eu.endpoint_url == "http://127.0.0.1:5001"
    assert eu.region == "us-east-1" and eu.addressing_style == "path"
    assert eu.secret_access_key is not None
    assert eu.secret_access_key.get_secret_value() == SECRETS[1]
    assert config.blockstore.s3.for_region("ap-south-1").endpoint_url is None


def test_config_file_variable_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "c.yaml", {"server": {"port": 1}})
    monkeypatch.setenv("LAKEMIRROR_CONFIG", str(path))
    assert load_config().server.port == 1


def test_environment_beats_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKEMIRROR_SERVER__PORT", "9100")
    monkeypatch.setenv("LAKEMIRROR_KV__TYPE", "sqlite")
    monkeypatch.setenv("LAKEMIRROR_DATA_DIR", "/srv/lakemirror")
    config = load_config(full_file(tmp_path))
    assert config.server.port == 9100
    assert config.server.host == "0.0.0.0"  # the file's, untouched
    assert config.kv.type == "sqlite"
    assert config.kv.dynamodb.table == "refs"
    assert config.data_dir == Path("/srv/lakemirror")


def test_nested_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKEMIRROR_KV__TYPE", "dynamodb")
    monkeypatch.setenv("LAKEMIRROR_KV__DYNAMODB__TABLE", "lakemirror-eu")
    monkeypatch.setenv("LAKEMIRROR_KV__DYNAMODB__CREATE_TABLE", "true")
    monkeypatch.setenv("LAKEMIRROR_BLOCKSTORE__S3__MAX_ATTEMPTS", "3")
    monkeypatch.setenv("LAKEMIRROR_BLOCKSTORE__S3__SECRET_ACCESS_KEY", SECRETS[4])
    monkeypatch.setenv(
        "LAKEMIRROR_BLOCKSTORE__S3__REGIONS", json.dumps({"eu-west-1": {"region": "eu-west-1"}})
    )
    monkeypatch.setenv("LAKEMIRROR_LOGGING__LEVEL", "WARNING")
    config = load_config()
    assert config.kv.type == "dynamodb"
    assert config.kv.dynamodb.table == "lakemirror-eu"
    assert config.kv.dynamodb.create_table is True
    assert config.blockstore.s3.max_attempts == 3
    assert config.blockstore.s3.for_region("eu-west-1").region == "eu-west-1"
    assert config.logging.level == "warning"
    assert REDACTED in str(config)
    assert SECRETS[4] not in repr(config)


def test_legacy_admin_variables_still_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKEMIRROR_ADMIN_ACCESS_KEY_ID", "AKIALEGACY")
    monkeypatch.setenv("LAKEMIRROR_ADMIN_SECRET_ACCESS_KEY", SECRETS[4])
    monkeypatch.setenv("LAKEMIRROR_ADMIN_USER", "root")
    auth = load_config(full_file(tmp_path)).auth
    assert auth.admin_user == "root"
    assert auth.admin_access_key_id is not None and auth.admin_secret_access_key is not None
    assert auth.admin_access_key_id.get_secret_value() == "AKIALEGACY"
    assert auth.admin_secret_access_key.get_secret_value() == SECRETS[4]
    # the schema's own variable wins over the legacy one
    monkeypatch.setenv("LAKEMIRROR_AUTH__ADMIN_USER", "jane")
    assert load_config().auth.admin_user == "jane"


def test_overrides_beat_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKEMIRROR_SERVER__PORT", "9100")
    config = with_overrides(
        load_config(), {"server": {"port": 9200, "host": None}, "logging": {"level": None}}
    )
    assert config.server.port == 9200
    assert config.server.host == "127.0.0.1"
    moved = with_overrides(config, {"data_dir": "/elsewhere"})
    assert moved.sqlite_path() == Path("/elsewhere/kv.sqlite")
    with pytest.raises(ConfigurationError, match=r"server\.port"):
        with_overrides(config, {"server": {"port": 0}})


@pytest.mark.parametrize(
    ("env", "data", "key"),
    [
        ({"LAKEMIRROR_KV__TYPE": "postgres"}, {}, "kv.type"),
        ({"LAKEMIRROR_SERVER__PORT": "eighty"}, {}, "server.port"),
        ({}, {"server": {"port": 70000}}, "server.port"),
        ({}, {"kv": {"tpye": "sqlite"}}, "kv.tpye: unknown key"),
        ({}, {"logging": {"format": "xml"}}, "logging.format"),
        ({}, {"blockstore": {"s3": {"addressing_style": "dns"}}}, "blockstore.s3.addressing_style"),
        ({}, {"blockstore": {"s3": {"regions": {"eu": {"max_attempts": 0}}}}}, "regions.eu.max"),
    ],
)
def test_invalid_values_name_the_key(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    data: dict[str, object],
    key: str,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError) as raised:
        load_config(write(tmp_path / "c.yaml", data))
    message = str(raised.value)
    assert key in message
    assert "\n" not in message


def test_invalid_secret_is_not_echoed(tmp_path: Path) -> None:
    data = {"auth": {"admin_secret_access_key": [SECRETS[3]]}, "kv": {"dynamo": SECRETS[2]}}
    with pytest.raises(ConfigurationError) as raised:
        load_config(write(tmp_path / "c.yaml", data))
    message = str(raised.value)
    assert "auth.admin_secret_access_key" in message and "kv.dynamo: unknown key" in message
    assert SECRETS[3] not in message and SECRETS[2] not in message


def test_unreadable_files_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read configuration file"):
        load_config(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("server: [unclosed\n")
    with pytest.raises(ConfigurationError, match="not valid YAML"):
        load_config(tmp_path / "bad.yaml")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(ConfigurationError, match="must hold a mapping"):
        load_config(tmp_path / "list.yaml")
    (tmp_path / "empty.yaml").write_text("")
    assert load_config(tmp_path / "empty.yaml") == LakeMirrorConfig()


def test_redacted_masks_every_secret(tmp_path: Path) -> None:
    shown = json.dumps(redacted(load_config(full_file(tmp_path))))
    for secret in SECRETS[:4]:
        assert secret not in shown
    assert shown.count(REDACTED) == 5  # four secrets and the admin key id (SecretStr)


def test_redact_secrets_processor_masks_nested_keys() -> None:
    event = {
        "event": "x",
        "Authorization": "Basic abc",
        "headers": {"X-Auth-Token": "t", "accept": "json"},
        "items": [{"password": "p"}],
        "secret_access_key": None,
    }
    out = redact_secrets(None, "info", event)
    assert out["Authorization"] == REDACTED
    assert out["headers"] == {"X-Auth-Token": REDACTED, "accept": "json"}
    assert out["items"] == [{"password": REDACTED}]
    assert out["secret_access_key"] is None


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.upper().startswith("LAKEMIRROR_")}
    return subprocess.run(
        [sys.executable, "-m", "mirror.cli.main", *args],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_config_show_redacts_secrets(tmp_path: Path) -> None:
    path = full_file(tmp_path)
    env = {
        "LAKEMIRROR_BLOCKSTORE__S3__SECRET_ACCESS_KEY": SECRETS[4],
        "LAKEMIRROR_ADMIN_SECRET_ACCESS_KEY": SECRETS[4] + "-legacy",
        "LAKEMIRROR_SERVER__PORT": "9300",
    }
    as_yaml = run_cli("config", "show", "--config", str(path), env=env)
    as_json = run_cli("config", "show", "--config", str(path), "--output", "json", env=env)
    for result in (as_yaml, as_json):
        assert result.returncode == 0, result.stderr
        for secret in SECRETS:
            assert secret not in result.stdout + result.stderr
    shown = yaml.safe_load(as_yaml.stdout)
    assert shown == json.loads(as_json.stdout)
    # the host from the file, the port from the environment (over the file's), the defaults
    defaults = ServerSettings().model_dump(mode="json")
    assert shown["server"] == {**defaults, "host": "0.0.0.0", "port": 9300}
    assert defaults["host"] != "0.0.0.0" and defaults["workers"] == 1
    assert shown["kv"]["dynamodb"]["secret_access_key"] == REDACTED
    assert shown["blockstore"]["s3"]["secret_access_key"] == REDACTED
    assert shown["auth"]["admin_secret_access_key"] == REDACTED
    assert shown["kv"]["sqlite"]["path"] == str(tmp_path / "data" / "kv.sqlite")


def test_config_show_without_file_is_the_embedded_default(tmp_path: Path) -> None:
    result = run_cli("config", "show", env={})
    assert result.returncode == 0, result.stderr
    shown = yaml.safe_load(result.stdout)
    assert shown["kv"]["type"] == "sqlite"
    assert shown["blockstore"]["local"]["root"] == "lakemirror-data"


def test_invalid_configuration_exits_2_with_one_line(tmp_path: Path) -> None:
    result = run_cli("config", "show", env={"LAKEMIRROR_KV__TYPE": "postgres"})
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "kv.type" in lines[0] and "'postgres'" in lines[0]
    server = run_cli("server", "--port", "1", env={"LAKEMIRROR_LOGGING__LEVEL": "loud"})
    assert server.returncode == 2
    assert "logging.level" in server.stderr and len(server.stderr.strip().splitlines()) == 1
