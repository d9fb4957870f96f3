# llm-probe container image.
#   docker build -t llm-probe .
#   docker run -p 9464:9464 -v $PWD/probes.yaml:/etc/llm-probe/probes.yaml:ro llm-probe
# The build steps are the ones CI runs: cargo build --locked --release.
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
RUN cargo build --locked --release

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/llm-probe /usr/local/bin/llm-probe
USER nonroot
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/llm-probe"]
CMD ["run", "--config.file", "/etc/llm-probe/probes.yaml", "--web.listen-address", "0.0.0.0:9464"]
