"""One typed settings object, read from a TOML file and STAC_GDAL_MCP_* environment variables.

Precedence (highest first): explicit keyword arguments, environment variables, the TOML file
(`--config` or STAC_GDAL_MCP_CONFIG), defaults. Nested keys use a double underscore in the
environment: STAC_GDAL_MCP_NETWORK__ALLOW_PRIVATE_HOSTS=true, STAC_GDAL_MCP_LIMITS__PAGE_SIZE=50.

Catalogs from a file *extend* the built-in ones; a catalog with a built-in id replaces that
one; `builtin_catalogs = false` drops the built-ins altogether.

Unknown keys are refused at every level (the top level, each section, each [[catalogs]] entry)
with one line naming the key, its section and the closest valid key; so are STAC_GDAL_MCP_*
variables that name no setting. [[external_servers]] entries are the exception: their unknown
keys fail that one server at startup (see extensions/external.py and docs/extending.md).

This is the only module that reads the process environment.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import stat
import tomllib
import typing
from pathlib import Path
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from .errors import ConfigError
from .setting_checks import checked_scheduler, checked_token

ENV_PREFIX = "STAC_GDAL_MCP_"
SAMPLE_CATALOG = Path(__file__).parent / "data" / "sample" / "catalog.json"


class CatalogConfig(BaseModel):
    """A named catalog: a STAC API (`url`) or a local static catalog / ItemCollection / NDJSON (`path`)."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    title: str | None = None
    url: str | None = None
    path: Path | None = None
    # stac-geoparquet parts given one by one: files, folders or globs (`paths`), or files' URLs (`urls`)
    paths: list[Path] | None = None
    urls: list[str] | None = None
    signing: Literal["planetary-computer"] | None = None
    # signing = "planetary-computer": the SAS token endpoint (default: the planetary-computer
    # package's, PC_SDK_SAS_URL) and the hosts whose asset hrefs are signed ("." + a domain
    # suffix, or a host name; default [".blob.core.windows.net"]). See signing.py.
    sas_url: str | None = None
    signed_hosts: list[str] | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    requester_pays: bool = False

    @model_validator(mode="after")
    def _one_location(self) -> CatalogConfig:
        given = [k for k in ("url", "path", "paths", "urls") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                f"catalog '{self.id}': give exactly one of `url` or `path` (or, for stac-geoparquet parts, "
                "`paths` or `urls`)"
            )
        if given[0] in ("paths", "urls") and not getattr(self, given[0]):
            raise ValueError(f"catalog '{self.id}': `{given[0]}` is empty")
        for url in [self.url] if self.url is not None else self.urls or []:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"catalog '{self.id}': url must start with http:// or https://")
        return self

    @property
    def location(self) -> str:
        listed = self.urls or [str(p) for p in self.paths or []]
        if listed:
            return listed[0] if len(listed) == 1 else f"{listed[0]} and {len(listed) - 1} more"
        return self.url if self.url is not None else str(self.path)

    @property
    def kind(self) -> Literal["api", "local", "geoparquet"]:
        """geoparquet: a .parquet file, a folder or a glob (catalogs/geoparquet.py); else api or local."""
        if self.paths is not None or self.urls is not None:
            return "geoparquet"
        path = None if self.path is None else Path(self.path).expanduser()
        named = urlsplit(self.url).path if self.url else self.location  # a signed URL's query aside
        if named.lower().endswith((".parquet", ".geoparquet")) or (
            path is not None and (path.is_dir() or any(c in str(path) for c in "*?["))
        ):
            return "geoparquet"
        return "api" if self.url else "local"

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


# "host", "host:port", "1.2.3.4:80", "[fd00::1]", "[fd00::1]:443", "fd00::1"
_HOST_PORT = re.compile(
    r"^(?:(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(?::\d{1,5})?|[0-9A-Fa-f]*:[0-9A-Fa-f]*:[0-9A-Fa-f:.]*)$"
)


class NetworkSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    allow_private_hosts: bool = False
    # single non-public hosts allowed even so: "stac.internal", "10.0.0.5:8080", "[fd00::5]:443"
    allowed_private_hosts: list[str] = Field(default_factory=list)
    timeout_s: float = Field(30, gt=0)  # the whole of one HTTP request (not one read)
    max_retries: int = Field(3, ge=0, le=10)
    # streamable-HTTP transport: Host names (beyond loopback and the bound address) and browser
    # Origins (beyond loopback ones) it answers; others get 403 (DNS rebinding, cross-site pages)
    http_allowed_hosts: list[str] = Field(default_factory=list)
    http_allowed_origins: list[str] = Field(default_factory=list)

    @field_validator("allowed_private_hosts", "http_allowed_hosts")
    @classmethod
    def _hosts(cls, values: list[str]) -> list[str]:
        for value in values:
            if not _HOST_PORT.match(value.strip()):
                raise ValueError(f"'{value}' is not a host name, an address, or either with :port")
        return [v.strip() for v in values]

    @field_validator("http_allowed_origins")
    @classmethod
    def _origins(cls, values: list[str]) -> list[str]:
        for value in values:
            if not value.startswith(("http://", "https://")) or value.rstrip("/").count("/") != 2:
                raise ValueError(f"'{value}' is not an origin such as https://app.example.com")
        return [v.rstrip("/") for v in values]


class LimitSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_items: int = Field(500, ge=1)
    page_size: int = Field(20, ge=1)
    max_output_pixels: int = Field(100_000_000, ge=1)
    max_output_bytes: int = Field(2 * 1024**3, ge=1)
    max_resource_bytes: int = Field(5 * 1024**2, ge=1)
    # items read at once (cloud cover's reader threads, dask threads of loads, catalogs of a federated
    # search): reads wait on the network far more than on the CPU, so more than the cores
    max_concurrency: int = Field(16, ge=1)
    # processing jobs running at once in one server; more wait their turn (the wait counts in job_timeout_s)
    max_jobs: int = Field(4, ge=1)
    # source pixels one operation may read (from the overview it uses), checked before reading
    max_read_pixels: int = Field(400_000_000, ge=1)
    # wall time of one processing job (reproject, convert, preview, cloud stats, loads), seconds
    job_timeout_s: float = Field(600, gt=0)
    # how long a finished MCP task (a tool call run in the background) keeps its result, seconds
    task_ttl_s: float = Field(900, gt=0)
    # bytes of items one search_items(detail="full") answer may carry (a note and next_cursor past it)
    max_result_bytes: int = Field(1024**2, ge=1024)
    # one SQL query over a stac-geoparquet catalog: memory DuckDB may use, and wall time, seconds
    query_memory_mb: int = Field(512, ge=16)
    query_timeout_s: float = Field(30, gt=0)
    # blocks of files read over HTTP kept on local disk (in an unlinked file of the workspace's cache
    # folder) beyond those kept in memory, per catalog, MB; 0: none (every read past memory fetched again)
    http_disk_cache_mb: int = Field(1024, ge=0)
    # whole local copies of the files of at most 16 MB that searches over HTTP open, read by DuckDB
    # as local files (in a folder of the workspace's cache folder removed when the process ends),
    # per catalog, MB; 0: none (every file read by range)
    http_copies_mb: int = Field(1024, ge=0)
    # a job whose estimate reads or writes more bytes than this is confirmed first: the MCP server
    # asks the user (elicitation) or answers the estimate, to be called again with confirm=true;
    # 0: never asked
    confirm_bytes: int = Field(1024**3, ge=0)
    # zonal statistics' zones (checked before they are read): zones in one call (a file's count from
    # its metadata), vertices of one zone, and GeoJSON given inline: its size and nesting depth
    max_zones: int = Field(1_000_000, ge=1)
    max_zone_vertices: int = Field(100_000, ge=4)
    max_geometries_bytes: int = Field(2 * 1024**2, ge=1024)
    max_geometries_depth: int = Field(20, ge=8)
    # zonal statistics of a zones file (GeoParquet, GeoPackage, FlatGeobuf) with more features than
    # this run at region scale (read in groups of neighbours, results written as they come); and the
    # most features such a file may have (both counted from the file's metadata, before reading it)
    zonal_region_zones: int = Field(20_000, ge=1)
    max_region_zones: int = Field(10_000_000, ge=1)
    # distinct values of a raster that zonal statistics' class statistics (frac, unique, majority,
    # minority, mode) take as classes: more is a continuous raster, refused before any column
    max_classes: int = Field(1_000, ge=1)


class PluginSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    dir: Path | None = None
    strict: bool = False


#: The map's default basemap: OpenStreetMap's public tiles (`[map] basemap = ""` turns it off).
DEFAULT_BASEMAP = "https://tile.openstreetmap.org/{z}/{x}/{y}.png"
DEFAULT_ATTRIBUTION = "© OpenStreetMap contributors"


class MapSettings(BaseModel):
    """The map app's basemap: a tile URL template ({z}/{x}/{y}, http or https) drawn under the
    fields where the host lets the page load it (its origin is declared in the app's CSP), and its
    attribution; "" turns tiles off (the offline Natural Earth map only)."""

    model_config = ConfigDict(extra="forbid")
    basemap: str = DEFAULT_BASEMAP
    attribution: str | None = None  # default: OpenStreetMap's for the default tiles, else none

    @field_validator("basemap")
    @classmethod
    def _basemap(cls, v: str) -> str:
        from urllib.parse import urlsplit

        parts = urlsplit(v)
        if v and (
            parts.scheme not in ("http", "https")
            or not parts.netloc
            or not all(k in v for k in ("{z}", "{x}", "{y}"))
        ):
            raise ValueError(
                f'map.basemap: a http(s) tile URL with {{z}}, {{x}} and {{y}}, or "" (off), not {v!r}'
            )
        return v

    @property
    def tiles(self) -> tuple[str | None, str | None]:
        """(tile URL or None when off, attribution)."""
        if not self.basemap:
            return None, None
        default = DEFAULT_ATTRIBUTION if self.basemap == DEFAULT_BASEMAP else None
        return self.basemap, self.attribution if self.attribution is not None else default


# The only variables an external server inherits from our environment (besides its own `env`).
CHILD_ENV_VARS = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "SYSTEMROOT",
)


class ExternalServerConfig(BaseModel):
    """An external MCP server over stdio (see docs/extending.md). Validated further at startup."""

    # Unknown keys are kept and refused per server at startup, so one bad entry fails only itself.
    model_config = ConfigDict(extra="allow")
    name: str
    cmd: list[str] | None = None
    script: str | None = None
    env: dict[str, Any] = Field(default_factory=dict)
    cwd: str | None = None
    timeout_s: float = Field(30, gt=0)
    trusted: bool = False
    tools: list[str] | None = None
    max_result_bytes: int = Field(256 * 1024, ge=1024)
    # list_extensions and the log show the program name and the number of arguments; true shows
    # the arguments too (declare them safe: no secrets in `cmd`)
    show_args: bool = False

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
    """Every setting of the server and the library, built once (`load_settings`) and passed down.

    Sources, highest first: keyword arguments, STAC_GDAL_MCP_* environment variables (nested keys
    with `__`), the TOML file, defaults. Sections: `network` (NetworkSettings), `limits`
    (LimitSettings), `plugins` (PluginSettings), `map` (MapSettings); `catalogs` ([[catalogs]], CatalogConfig) extend
    the built-in ones; `external_servers` ([[external_servers]]). Unknown keys are refused.
    Every key is listed in docs/configuration.md."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
    )
    # The parsed TOML file of one load_settings() call (set on a per-call subclass).
    _file_data: ClassVar[dict[str, Any]] = {}

    workspace: Path = Field(default_factory=_default_workspace)
    default_catalog: str = "earth-search"
    builtin_catalogs: bool = True
    catalogs: list[CatalogConfig] = Field(default_factory=list)
    # canonical collection name -> {catalog id: that catalog's collection id(s)}; extends and
    # overrides the built-in table of discovery/aliases.py (see docs/discovery.md)
    collection_aliases: dict[str, dict[str, str | list[str]]] = Field(default_factory=dict)
    network: NetworkSettings = Field(default_factory=NetworkSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    plugins: PluginSettings = Field(default_factory=PluginSettings)
    map: MapSettings = Field(default_factory=MapSettings)
    external_servers: list[ExternalServerConfig] = Field(default_factory=list)
    dask_scheduler: str | None = None
    token: str | None = Field(default=None, repr=False)
    log_level: str = "INFO"

    @field_validator("token")
    @classmethod
    def _token(cls, v: str | None) -> str | None:
        return None if v is None else checked_token(v, "token")

    @field_validator("dask_scheduler")
    @classmethod
    def _scheduler(cls, v: str | None) -> str | None:
        return checked_scheduler(v) if v else None

    @field_validator("workspace")
    @classmethod
    def _expand(cls, v: Path) -> Path:
        return Path(os.path.expanduser(str(v))).resolve()

    @model_validator(mode="after")
    def _merge_catalogs(self) -> Settings:
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
            f"unknown catalog {str(cid)[:80]!r}; "
            f"configured catalogs: {', '.join(c.id for c in self.catalogs)}"
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
        # The TOML file is read (once) by load_settings() and handed over as _file_data.
        file_settings = InitSettingsSource(settings_cls, init_kwargs=getattr(settings_cls, "_file_data", {}))
        return (init_settings, env_settings, file_settings)


# Environment variables with short names the issues promise, mapped onto settings keys.
_ALIASES = {
    "STAC_GDAL_MCP_PLUGIN_DIR": ("plugins", "dir"),
    "STAC_GDAL_MCP_STRICT_PLUGINS": ("plugins", "strict"),
}


def load_settings(config: str | Path | None = None, **overrides: Any) -> Settings:
    """Build the settings once: `config` (or STAC_GDAL_MCP_CONFIG) names a TOML file."""
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    path = config or os.environ.get(ENV_PREFIX + "CONFIG")
    path = Path(path).expanduser() if path is not None else None
    file_data = _read_config_file(path) if path is not None else {}
    _check_environment_names(os.environ)
    for var, (section, key) in _ALIASES.items():
        if var in os.environ:
            overrides.setdefault(section, {}).setdefault(key, os.environ[var])
    overrides = {k: v for k, v in overrides.items() if v is not None}
    cls = Settings
    if file_data:
        cls = type("Settings", (Settings,), {"_file_data": file_data, "__module__": __name__})
    try:
        return cls(**overrides)
    except ValidationError as exc:
        errors = exc.errors()
        unknown = [e for e in errors if e["type"] == "extra_forbidden"]
        if unknown:  # the typo is the cause; what else fails follows from it
            parts, last = [], None
            for e in unknown:
                origin, text = _unknown_key_message(e["loc"], path, file_data, overrides)
                parts.append(text if origin == last else f"{origin}: {text}")
                last = origin
            raise ConfigError(" ".join(parts)) from None
        where = f" in {path}" if path else ""
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}" for e in errors
        )
        raise ConfigError(f"invalid configuration{where}: {problems}") from None
    except SettingsError as exc:  # e.g. a STAC_GDAL_MCP_* variable holding malformed JSON
        cause = f": {exc.__cause__}" if exc.__cause__ else ""
        raise ConfigError(f"invalid configuration: {exc}{cause}") from None


def _read_config_file(path: Path) -> dict[str, Any]:
    """The TOML file as a dict; /dev/null (and an empty file) is an empty configuration."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    if stat.S_ISDIR(mode):
        raise ConfigError(f"config file {path} is a directory, not a TOML file")
    if not stat.S_ISREG(mode):
        if os.path.exists(os.devnull) and os.path.samefile(path, os.devnull):
            return {}
        raise ConfigError(
            f"config file {path} is not a regular file (a device, pipe or socket), not a TOML file"
        )
    try:
        text = path.read_bytes().decode("utf-8")
    except PermissionError:
        raise ConfigError(f"cannot read config file {path}: permission denied") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read config file {path}: not UTF-8 text (byte {exc.start})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"cannot read config file {path}: not valid TOML: {exc}") from None


def _env_names() -> dict[str, str]:
    """Every STAC_GDAL_MCP_* name we read, upper case: the variable's suffix -> the setting it sets."""
    names = {
        "CONFIG": "the config file",
        **{var[len(ENV_PREFIX) :]: ".".join(k) for var, k in _ALIASES.items()},
    }
    for name, field in Settings.model_fields.items():
        names[name.upper()] = name
        model = _model_of(field.annotation)
        if model is not None and typing.get_origin(field.annotation) is not list:
            for sub in model.model_fields:
                names[f"{name}__{sub}".upper()] = f"{name}.{sub}"
    return names


def _check_environment_names(environ: typing.Mapping[str, str]) -> None:
    """A STAC_GDAL_MCP_* variable whose first part names no setting would be ignored: refuse it.
    (Unknown nested parts, STAC_GDAL_MCP_LIMITS__PAGE_SISE, are refused by validation.)"""
    known = _env_names()
    for var in sorted(environ):
        upper = var.upper()
        if not upper.startswith(ENV_PREFIX):
            continue
        suffix = upper[len(ENV_PREFIX) :]
        if suffix in known or suffix.split("__")[0] in known:
            continue
        close = difflib.get_close_matches(suffix, list(known), n=1, cutoff=0.6)
        hint = (
            f"did you mean {ENV_PREFIX}{close[0]}?"
            if close
            else f"settings: {', '.join(ENV_PREFIX + n for n in known if '__' not in n)}."
        )
        raise ConfigError(f"environment variable {var}: no such setting; {hint}")


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside an annotation (`M`, `M | None`, `list[M]`), if any."""
    if typing.get_origin(annotation) is None and isinstance(annotation, type):
        return annotation if issubclass(annotation, BaseModel) else None
    for arg in typing.get_args(annotation):
        model = _model_of(arg)
        if model is not None:
            return model
    return None


def _walk(data: Any, loc: tuple[Any, ...]) -> tuple[bool, Any]:
    """(found, value) at `loc` inside nested dicts and lists."""
    for part in loc:
        in_list = isinstance(part, int) and isinstance(data, list) and -len(data) <= part < len(data)
        if not (in_list or (isinstance(data, dict) and part in data)):
            return False, None
        data = data[part]
    return True, data


def _env_value(name: str) -> tuple[str, Any] | None:
    """(variable name, value) of STAC_GDAL_MCP_<name>, any case; JSON values decoded."""
    for var, value in os.environ.items():
        if var.upper() == (ENV_PREFIX + name).upper():
            try:
                return var, json.loads(value)
            except ValueError:
                return var, value
    return None


def _unknown_key_message(
    loc: tuple[Any, ...], path: Path | None, file_data: dict[str, Any], overrides: dict[str, Any]
) -> tuple[str, str]:
    """(where the unknown key came from, "unknown key 'k' in [section]; did you mean 'key'?")."""
    *section, key = loc
    section = tuple(section)
    model: type[BaseModel] | None = Settings
    for part in section:
        if isinstance(part, str) and model is not None and part in model.model_fields:
            model = _model_of(model.model_fields[part].annotation)
    valid = list(model.model_fields) if model is not None else []

    # Where did it come from? Arguments beat the environment, which beats the file.
    origin, data, env_var = "settings", None, None
    if _walk(overrides, loc)[0]:
        origin, data = f"load_settings({loc[0]}=...)", overrides
    elif all(isinstance(p, str) for p in loc) and len(loc) > 1 and (hit := _env_value("__".join(loc))):
        origin, env_var = f"environment variable {hit[0]}", ENV_PREFIX + "__".join(loc[:-1]).upper()
    elif (hit := _env_value(str(loc[0]))) and _walk({loc[0]: hit[1]}, loc)[0]:
        origin, data = f"environment variable {hit[0]}", {loc[0]: hit[1]}
    elif path is not None:
        origin, data = f"config file {path}", file_data

    if not section:
        where = "at the top level"
    elif isinstance(section[-1], int):
        where = f"in [[{'.'.join(str(p) for p in section[:-1])}]] entry {section[-1] + 1}"
        entry = _walk(data, section)[1] if data is not None else None
        if isinstance(entry, dict) and isinstance(entry.get("id", entry.get("name")), str):
            where += f" ({entry.get('id', entry.get('name'))!r})"
    else:
        where = f"in [{'.'.join(str(p) for p in section)}]"

    close = difflib.get_close_matches(str(key), valid, n=1, cutoff=0.6)
    if close and env_var:
        hint = f"did you mean '{close[0]}' ({env_var}__{close[0].upper()})?"
    elif close:
        hint = f"did you mean '{close[0]}'?"
    else:
        hint = f"valid keys: {', '.join(valid)}." if valid else "no keys are allowed here."
    return origin, f"unknown key '{key}' {where}; {hint}"
