//! Server-Sent Events: an incremental decoder (any chunking, split UTF-8, CRLF/CR/LF, comments)
//! and an encoder that writes exact bytes and refuses line breaks where they would corrupt a frame.

pub mod decoder;
pub mod encoder;
