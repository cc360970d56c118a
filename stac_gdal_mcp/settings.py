"""One typed settings object, read from a TOML file and STAC_GDAL_MCP_* environment variables.

Precedence (highest first): explicit keyword arguments, environment variables, the TOML file
(`--config` or STAC_GDAL_MCP_CONFIG), defaults. Nested keys use a double underscore in the
environment: STAC_GDAL_MCP_NETWORK__ALLOW_PRIVATE_HOSTS=true, STAC_GDAL_MCP_LIMITS__PAGE_SIZE=50.

Catalogs from a file *extend* the built-in ones; a catalog with a built-in id replaces that
one; `builtin_catalogs = false` drops the built-ins altogether.

This is the only module that reads the process environment.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from .errors import ConfigError

ENV_PREFIX = "STAC_GDAL_MCP_"
SAMPLE_CATALOG = Path(__file__).parent / "data" / "sample" / "catalog.json"


class CatalogConfig(BaseModel):
    """A named catalog: a STAC API (`url`) or a local static catalog / ItemCollection / NDJSON (`path`)."""

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    title: str | None = None
    url: str | None = None
    path: Path | None = None
    signing: Literal["planetary-computer"] | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    requester_pays: bool = False

    @model_validator(mode="after")
    def _one_location(self) -> "CatalogConfig":
        if (self.url is None) == (self.path is None):
            raise ValueError(f"catalog '{self.id}': give exactly one of `url` or `path`")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"catalog '{self.id}': url must start with http:// or https://")
        return self

    @property
    def location(self) -> str:
        return self.url if self.url is not None else str(self.path)

    def resolved_headers(self, environ: dict[str, str] | None = None) -> dict[str, str]:
        """Header values of the form ``env:NAME`` are read from the environment."""
        return resolve_env_values(self.headers, environ, f"catalog '{self.id}': header")


def resolve_env_values(values: dict[str, Any], environ: dict[str, str] | None, what: str) -> dict[str, str]:
    """Values must be strings; ``env:NAME`` is replaced by that variable of `environ` (default: ours)."""
    env = os.environ if environ is None else environ
    out = {}
    for name, value in values.items():
        if not isinstance(value, str):
            raise ConfigError(f"{what} {name} must be a string, got {type(value).__name__}")
        if value.startswith("env:"):
            var = value[4:]
            if var not in env:
                raise ConfigError(f"{what} {name} needs environment variable {var}, which is not set")
            value = env[var]
        out[name] = value
    return out


BUILTIN_CATALOGS = [
    CatalogConfig(
        id="earth-search",
        title="Earth Search by Element 84 (AWS open data)",
        url="https://earth-search.aws.element84.com/v1",
    ),
    CatalogConfig(
        id="planetary-computer",
        title="Microsoft Planetary Computer",
        url="https://planetarycomputer.microsoft.com/api/stac/v1",
        signing="planetary-computer",
    ),
    CatalogConfig(
        id="usgs-landsat",
        title="USGS Landsat Collection 2 (LandsatLook STAC)",
        url="https://landsatlook.usgs.gov/stac-server",
        requester_pays=True,
    ),
    CatalogConfig(
        id="sample",
        title="Bundled offline sample (Sentinel-2 L2A-like and Landsat C2 L2-like)",
        path=SAMPLE_CATALOG,
    ),
]


class NetworkSettings(BaseModel):
    allow_private_hosts: bool = False
    timeout_s: float = Field(30, gt=0)
    max_retries: int = Field(3, ge=0, le=10)


class LimitSettings(BaseModel):
    max_items: int = Field(500, ge=1)
    page_size: int = Field(20, ge=1)
    max_output_pixels: int = Field(100_000_000, ge=1)
    max_output_bytes: int = Field(2 * 1024**3, ge=1)
    max_resource_bytes: int = Field(5 * 1024**2, ge=1)
    max_concurrency: int = Field(8, ge=1)


class PluginSettings(BaseModel):
    dir: Path | None = None
    strict: bool = False


# The only variables an external server inherits from our environment (besides its own `env`).
CHILD_ENV_VARS = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE",
    "TZ", "TMPDIR", "SYSTEMROOT",
)


class ExternalServerConfig(BaseModel):
    """An external MCP server over stdio (see docs/extending.md). Validated further at startup."""

    model_config = {"extra": "allow"}
    name: str
    cmd: list[str] | None = None
    script: str | None = None
    env: dict[str, Any] = Field(default_factory=dict)
    cwd: str | None = None
    timeout_s: float = Field(30, gt=0)
    trusted: bool = False
    tools: list[str] | None = None
    max_result_bytes: int = Field(256 * 1024, ge=1024)

    def child_env(self, environ: dict[str, str] | None = None) -> dict[str, str]:
        """The child's whole environment: CHILD_ENV_VARS from ours, plus `env` (``env:NAME`` values
        are read from our environment). Nothing else of ours - tokens, keys - reaches the child."""
        env = os.environ if environ is None else environ
        out = {name: env[name] for name in CHILD_ENV_VARS if name in env}
        out.update(resolve_env_values(self.env, env, f"external server '{self.name}': env"))
        return out


def _default_workspace() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir("stac-gdal-mcp")) / "workspace"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
    )

    workspace: Path = Field(default_factory=_default_workspace)
    default_catalog: str = "earth-search"
    builtin_catalogs: bool = True
    catalogs: list[CatalogConfig] = Field(default_factory=list)
    network: NetworkSettings = Field(default_factory=NetworkSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    plugins: PluginSettings = Field(default_factory=PluginSettings)
    external_servers: list[ExternalServerConfig] = Field(default_factory=list)
    dask_scheduler: str | None = None
    token: str | None = Field(default=None, repr=False)
    log_level: str = "INFO"

    @field_validator("workspace")
    @classmethod
    def _expand(cls, v: Path) -> Path:
        return Path(os.path.expanduser(str(v))).resolve()

    @model_validator(mode="after")
    def _merge_catalogs(self) -> "Settings":
        merged = {c.id: c for c in (BUILTIN_CATALOGS if self.builtin_catalogs else [])}
        for c in self.catalogs:
            merged[c.id] = c
        self.catalogs = list(merged.values())
        if self.default_catalog not in merged:
            raise ValueError(
                f"default_catalog '{self.default_catalog}' is not among the catalogs: {', '.join(merged)}"
            )
        return self

    def catalog(self, catalog_id: str | None) -> CatalogConfig:
        from .errors import CatalogNotFound

        cid = catalog_id or self.default_catalog
        for c in self.catalogs:
            if c.id == cid:
                return c
        raise CatalogNotFound(
            f"unknown catalog '{cid}'; configured catalogs: {', '.join(c.id for c in self.catalogs)}"
        )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The TOML file comes from model_config["toml_file"], set per load in load_settings().
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls))


# Environment variables with short names the issues promise, mapped onto settings keys.
_ALIASES = {
    "STAC_GDAL_MCP_PLUGIN_DIR": ("plugins", "dir"),
    "STAC_GDAL_MCP_STRICT_PLUGINS": ("plugins", "strict"),
}


def load_settings(config: str | Path | None = None, **overrides: Any) -> Settings:
    """Build the settings once: `config` (or STAC_GDAL_MCP_CONFIG) names a TOML file."""
    from pydantic import ValidationError

    path = config or os.environ.get(ENV_PREFIX + "CONFIG")
    if path is not None:
        path = Path(path).expanduser()
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist")
    for var, (section, key) in _ALIASES.items():
        if var in os.environ:
            overrides.setdefault(section, {}).setdefault(key, os.environ[var])
    cls = Settings
    if path is not None:
        cls = type("Settings", (Settings,), {"model_config": {**Settings.model_config, "toml_file": path}})
    try:
        return cls(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        where = f" in {path}" if path else ""
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(f"invalid configuration{where}: {problems}") from None
    except Exception as exc:  # malformed TOML
        if path is None:
            raise
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
