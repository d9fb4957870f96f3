// The official AWS SDK for JavaScript v3 (@aws-sdk/client-bedrock-runtime) as the client of
// llm-probe's simulator: it signs a ConverseStream request with its own SigV4 signer, sends it to
// the endpoint given, decodes the binary event stream with AWS's own codec and prints what it
// got as one JSON object: {"events": [...]} or, when the stream ends in an exception,
// {"events": [...], "error": {"name": ..., "message": ...}}.
// Usage: NODE_PATH=<dir>/node_modules node converse-stream.cjs <endpoint> <modelId>
const { BedrockRuntimeClient, ConverseStreamCommand } = require("@aws-sdk/client-bedrock-runtime");
// HTTP/1.1 (the client's default for this API is HTTP/2, which a plain-http endpoint would need
// as cleartext h2; the bytes of the event stream are the same either way).
const { NodeHttpHandler } = require("@smithy/node-http-handler");

async function main() {
  const [endpoint, modelId] = process.argv.slice(2);
  const client = new BedrockRuntimeClient({
    region: "us-east-1",
    endpoint,
    maxAttempts: 1,
    requestHandler: new NodeHttpHandler(),
    credentials: { accessKeyId: "AKIDSDKTEST", secretAccessKey: "sdk-secret", sessionToken: "sdk-token" },
  });
  const events = [];
  const out = { events };
  try {
    const res = await client.send(
      new ConverseStreamCommand({
        modelId,
        messages: [{ role: "user", content: [{ text: "Say something." }] }],
        inferenceConfig: { maxTokens: 64 },
      }),
    );
    for await (const event of res.stream) {
      events.push(event);
    }
  } catch (e) {
    out.error = { name: e.name, message: e.message };
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}

main();
