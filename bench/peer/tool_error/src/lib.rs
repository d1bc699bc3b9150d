//! The `tool_error` detector behind the peer's pointer/length ABI (`peer-abi`).
//! Owns nothing but the export; never shipped.

peer_abi::export_peer!(tool_error::ToolError);
