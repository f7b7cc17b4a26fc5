//! Serves fake-mcp with its default tools on a loopback port and prints its MCP URL (for trying
//! a client against it by hand); `--fault JSON` adds a rule, `--control-token T` opens the
//! control API.
#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let token = args
        .windows(2)
        .find(|w| w[0] == "--control-token")
        .map(|w| w[1].clone())
        .unwrap_or_default();
    let h = fake_mcp::Handle::with_control(provider_model::mcp::tools::default_tools(), token)
        .map_err(|d| std::io::Error::other(d.join("; ")))?;
    for w in args.windows(2).filter(|w| w[0] == "--fault") {
        let rule = serde_json::from_str(&w[1]).map_err(std::io::Error::other)?;
        h.add_rule(rule)
            .map_err(|d| std::io::Error::other(d.join("; ")))?;
    }
    let (url, task) = fake_mcp::start(&h).await?;
    println!("{url}");
    let _ = task.await;
    Ok(())
}
