//! Self-tests of the stand-ins the suites run against that are not upstreams: the local SearXNG
//! and the benchmark's stream. (Here rather than as the library's unit tests: those would compile
//! the whole test-support library a second time, as its test harness.)

mod searxng {
    use std::time::Duration;

    use bridge_tests::http::{HttpResponse, send};
    use bridge_tests::searxng::*;
    use serde_json::{Value, json};

    const T: Duration = Duration::from_secs(10);

    async fn server() -> bridge_tests::Result<SearxNg> {
        SearxNg::start(|q| {
            if q == "rust async" {
                vec![
                    SearchResultSpec::new("https://tokio.rs/", "Tokio", "An async runtime")
                        .with_published("2024-05-01T12:30:00"),
                    SearchResultSpec::new("https://rust-lang.org/", "Rust", "A language"),
                    SearchResultSpec::new("http://tokio.rs/", "Tokio, the runtime", "x"),
                ]
            } else {
                Vec::new()
            }
        })
        .await
    }

    async fn get(s: &SearxNg, path_and_query: &str) -> bridge_tests::Result<HttpResponse> {
        send(
            "GET",
            &format!("{}{path_and_query}", s.base_url()),
            &[],
            None,
            T,
        )
        .await
    }

    #[tokio::test]
    async fn a_good_query_gets_searxng_json() -> bridge_tests::Result<()> {
        let s = server().await?;
        let r = send("GET", &s.json_search_url("rust   async"), &[], None, T).await?;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.header("content-type"), Some("application/json"));
        let body = r.json()?;
        let keys: Vec<&str> = body
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        assert_eq!(
            keys,
            [
                "query",
                "results",
                "answers",
                "corrections",
                "infoboxes",
                "suggestions",
                "unresponsive_engines"
            ]
        );
        assert_eq!(body["query"], "rust async");
        let results = body["results"].as_array().cloned().unwrap_or_default();
        assert_eq!(results.len(), 2, "{body}");
        // The two tokio.rs hits merged: longer title, https kept, positions 1 and 3.
        let first = &results[0];
        assert_eq!(first["url"], "https://tokio.rs/");
        assert_eq!(first["title"], "Tokio, the runtime");
        assert_eq!(first["content"], "An async runtime");
        assert_eq!(first["positions"], json!([1, 3]));
        assert_eq!(first["publishedDate"], "2024-05-01T12:30:00");
        assert_eq!(first["pubdate"], "2024-05-01 12:30:00");
        assert_eq!(
            first["parsed_url"],
            json!(["https", "tokio.rs", "/", "", "", ""])
        );
        assert_eq!(first["engines"], json!([ENGINE]));
        let second = &results[1];
        assert_eq!(second["url"], "https://rust-lang.org/");
        assert_eq!(second["publishedDate"], Value::Null);
        assert_eq!(second["score"], 0.5);
        // Python's json.dumps layout.
        assert!(
            r.text()
                .starts_with("{\"query\": \"rust async\", \"results\": [{")
        );
        let q = s.queries();
        assert_eq!(q.len(), 1);
        assert_eq!(q[0].status, 200);
        assert_eq!(q[0].param("q"), Some("rust   async"));
        Ok(())
    }

    #[tokio::test]
    async fn a_missing_q_is_400_no_query() -> bridge_tests::Result<()> {
        let s = server().await?;
        let r = get(&s, "/search?format=json").await?;
        assert_eq!(r.status, 400);
        assert_eq!(r.text(), "{\"error\": \"No query\"}");
        let r = get(&s, "/search?q=&format=json").await?;
        assert_eq!(r.status, 400);
        // Without a format: the start page, 200, as SearXNG.
        let r = get(&s, "/search").await?;
        assert_eq!(r.status, 200);
        assert!(r.text().contains("<form id=\"search\""));
        assert_eq!(
            s.queries().iter().map(|q| q.status).collect::<Vec<_>>(),
            [400, 400, 200]
        );
        Ok(())
    }

    #[tokio::test]
    async fn formats_not_enabled_are_403_and_unknown_ones_html() -> bridge_tests::Result<()> {
        let s = server().await?;
        for format in ["csv", "rss"] {
            let r = get(&s, &format!("/search?q=x&format={format}")).await?;
            assert_eq!(r.status, 403);
            assert!(
                r.text().contains("<title>403 Forbidden</title>"),
                "{}",
                r.text()
            );
            assert!(r.text().contains("You don&#39;t have the permission"));
        }
        let r = get(&s, "/search?q=x&format=JSON").await?;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
        Ok(())
    }

    #[tokio::test]
    async fn bad_pageno_is_400() -> bridge_tests::Result<()> {
        let s = server().await?;
        for (pageno, message) in [
            ("0", "Invalid value 0 for parameter pageno"),
            ("-1", "Invalid value -1 for parameter pageno"),
            ("abc", "Invalid value abc for parameter pageno"),
            ("", "Empty pageno parameter"),
        ] {
            let r = get(&s, &format!("/search?q=x&format=json&pageno={pageno}")).await?;
            assert_eq!(r.status, 400);
            assert_eq!(r.json()?, json!({ "error": message }));
        }
        let r = get(&s, "/search?q=x&format=json&pageno=002").await?;
        assert_eq!(r.status, 200);
        Ok(())
    }

    #[tokio::test]
    async fn bad_time_range_safesearch_and_language_are_400() -> bridge_tests::Result<()> {
        let s = server().await?;
        for (query, message) in [
            (
                "time_range=hour",
                "Invalid value hour for parameter time_range",
            ),
            (
                "safesearch=0003",
                "Invalid value 3 for parameter safesearch",
            ),
            ("safesearch=", "Empty safesearch parameter"),
            ("language=EN", "Invalid value EN for parameter language"),
            (
                "timeout_limit=abc",
                "Invalid value abc for parameter timeout_limit",
            ),
        ] {
            let r = get(&s, &format!("/search?q=x&format=json&{query}")).await?;
            assert_eq!(r.status, 400, "{query}");
            assert_eq!(r.json()?, json!({ "error": message }));
        }
        for ok in [
            "time_range=",
            "time_range=None",
            "time_range=week",
            "language=en-US",
            "language=all",
            "categories=nonsense",
            "timeout_limit=1_0",
        ] {
            let r = get(&s, &format!("/search?q=x&format=json&{ok}")).await?;
            assert_eq!(r.status, 200, "{ok}: {}", r.text());
        }
        Ok(())
    }

    #[tokio::test]
    async fn post_form_wins_and_other_paths_and_methods_are_refused() -> bridge_tests::Result<()> {
        let s = server().await?;
        let r = send(
            "POST",
            &format!("{}/search?format=html&q=ignored", s.base_url()),
            &[("content-type", "application/x-www-form-urlencoded")],
            Some(b"q=rust+async&format=json".to_vec()),
            T,
        )
        .await?;
        assert_eq!(r.status, 200);
        assert_eq!(r.json()?["query"], "rust async");
        assert_eq!(get(&s, "/v1/search").await?.status, 404);
        assert_eq!(get(&s, "/search/?q=x&format=json").await?.status, 404);
        let r = send("PUT", &s.json_search_url("x"), &[], None, T).await?;
        assert_eq!(r.status, 405);
        assert_eq!(r.header("allow"), Some("GET, HEAD, OPTIONS, POST"));
        let r = get(&s, "/healthz").await?;
        assert_eq!((r.status, r.text().as_str()), (200, "OK"));
        let r = get(&s, "/?q=a+b&format=json").await?;
        assert_eq!(r.status, 308);
        assert_eq!(r.header("location"), Some("/search?q=a+b&format=json"));
        Ok(())
    }

    #[test]
    fn urls_are_reparsed_as_python_does() {
        let p = ParsedUrl::parse("HTTPS://Example.COM/a/b;c/d;e?x#f");
        assert_eq!(
            p.to_json(),
            json!(["https", "Example.COM", "/a/b;c/d", "e", "x", "f"])
        );
        assert_eq!(p.url(), "https://Example.COM/a/b;c/d;e?x#f");
        assert_eq!(
            ParsedUrl::parse("example.com/x").url(),
            "http:///example.com/x"
        );
        assert_eq!(
            ParsedUrl::parse("//example.com/y").url(),
            "http://example.com/y"
        );
        assert_eq!(
            ParsedUrl::parse("https://example.com/?").url(),
            "https://example.com/"
        );
        assert_eq!(ParsedUrl::parse("mailto:a@b.c").url(), "mailto:a@b.c");
    }

    #[test]
    fn query_strings_decode_as_werkzeug_does() {
        assert_eq!(
            parse_urlencoded("q=caf%C3%A9+x&&b&c=%FF%4"),
            [
                ("q".to_owned(), "caf\u{e9} x".to_owned()),
                ("b".to_owned(), String::new()),
                ("c".to_owned(), "%FF%4".to_owned()),
            ]
        );
    }

    #[test]
    fn text_and_dates_are_normalised_as_searxng_does() {
        assert_eq!(normalize_text("a\r\nb\u{a0} c "), "a\r b\u{a0} c");
        assert_eq!(normalize_text("  x\t\ty "), "x y");
        assert_eq!(
            python_dates("2024-05-01T12:30:00.000123Z"),
            (
                "2024-05-01T12:30:00.000123+00:00".to_owned(),
                "2024-05-01 12:30:00+0000".to_owned()
            )
        );
        assert_eq!(
            python_dates("2024-05-01"),
            (
                "2024-05-01T00:00:00".to_owned(),
                "2024-05-01 00:00:00".to_owned()
            )
        );
    }
}

mod bench_stream {
    #[test]
    fn the_stream_reaches_its_size_and_ends() {
        let sse = bridge_tests::bench_stream::large_stream(200_000);
        assert!(sse.len() >= 200_000);
        assert!(sse.ends_with("data: [DONE]\n\n"));
        assert!(
            sse.contains("reasoning_content")
                && sse.contains("\"content\"")
                && sse.contains("call_b")
        );
    }
}
