# llm-probe container image: a static-enough release binary on a minimal, shell-less runtime
# image, running as a non-root user.
#
#   docker build -t llm-probe .
#   docker run -p 9464:9464 -v "$PWD/probes.yaml:/etc/llm-probe/probes.yaml:ro" \
#     -e LOCAL_VLLM_KEY llm-probe
#
# The build step is the one CI runs on every change: cargo build --locked --profile dist (the
# release profile with LTO, Cargo.toml).

# Pinned toolchain: the same Rust as the CI machine.
FROM rust:1.95.0-slim-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
COPY src ./src
# The image has no .git: pass the commit for --version (docker build --build-arg
# LLM_PROBE_GIT_COMMIT=$(git rev-parse --short=12 HEAD) .); without it the version says
# "commit unknown".
ARG LLM_PROBE_GIT_COMMIT=""
RUN cargo build --locked --profile dist

# Minimal runtime: glibc and CA certificates, no shell, no package manager.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/dist/llm-probe /usr/local/bin/llm-probe
# 65532 is distroless's "nonroot" user.
USER 65532:65532
EXPOSE 9464
# The config file is mounted here; reload it with SIGHUP or POST /-/reload.
VOLUME ["/etc/llm-probe"]
# `healthcheck` asks http://127.0.0.1:9464/-/healthy; with --web.config.file (TLS, basic auth)
# point it at the exporter with environment variables instead of changing this line:
# LLM_PROBE_HEALTHCHECK_URL=https://127.0.0.1:9464/-/healthy, LLM_PROBE_HEALTHCHECK_CA_FILE (or
# LLM_PROBE_HEALTHCHECK_INSECURE_SKIP_VERIFY=true), LLM_PROBE_HEALTHCHECK_USERNAME and
# LLM_PROBE_HEALTHCHECK_PASSWORD_FILE (docs/security.md, "TLS and basic auth").
HEALTHCHECK --interval=30s --timeout=5s --start-period=5s --retries=3 \
  CMD ["/usr/local/bin/llm-probe", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/llm-probe"]
CMD ["run", "--config.file", "/etc/llm-probe/probes.yaml", "--web.listen-address", "0.0.0.0:9464"]
