/* A token-tick mock LLM server for benchmarks/client_overhead.py (#43 item 1).
 *
 * One thread, epoll, non-blocking sockets, HTTP/1.1 keep-alive, and h2c with prior knowledge
 * on the same port when built with -DTICK_H2 -lnghttp2 (`tickserver features` says which). A timerfd (CLOCK_MONOTONIC,
 * absolute, periodic) ticks every --interval-us; on each tick the server writes one token
 * event to every open stream, in one send() each (TCP_NODELAY: one segment a token). A
 * request's HTTP head (and, for the Anthropic API, message_start, content_block_start and
 * ping) goes out as soon as the request is read; its first token at the next tick; its last
 * token and the stream's tail (content_block_stop, message_delta with usage, message_stop;
 * or the finish chunk, the usage chunk and `data: [DONE]`) in one write at its N-th tick.
 *
 * Event shapes are the reference server's (reference_server/anthropic_api.py and
 * openai_api.py), which zqbench's dialects parse. The OpenAI role chunk goes out with the
 * first token, in the same write, as vLLM does, so that a client stamping TTFT at the first
 * chunk and one stamping it at the first content stamp the same moment.
 *
 * Every token write is stamped (CLOCK_MONOTONIC ns, the clock of Python's perf_counter_ns,
 * right after its send() returns) and logged, so the client side can compare its own times
 * with the server's: <log>.tokens (binary records: u32 seq, u32 index | deferred << 31,
 * i64 t_ns; `deferred`: the socket had not taken the previous bytes yet, the token was
 * queued behind them, i.e. the client was behind), <log>.requests (CSV: seq, x-request-id,
 * api, n tokens, t_recv_ns (request fully read), t_head_ns), <log>.ticks (binary: i64
 * deadline_ns, lateness_ns (tick handled minus its deadline), writes_ns (from the tick's
 * handling to its last write), streams written).
 *
 *   tickserver serve PORT INTERVAL_US DEFAULT_TOKENS LOG_PREFIX [MAX_SECONDS] [TOKEN_TEXT]
 *   tickserver sink PORT STREAMS TOKENS SECONDS API    (a C client: the server measured alone)
 *
 * A request's tokens: "max_tokens" (or "max_completion_tokens") from its JSON body when
 * present, else DEFAULT_TOKENS. Stops on SIGTERM/SIGINT or after MAX_SECONDS, flushing logs.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#ifdef TICK_H2
#include <nghttp2/nghttp2.h>
#endif

#define MAX_IN (1 << 20)
#define API_ANTHROPIC 1
#define API_OPENAI 2

typedef struct {
    char *p;
    size_t len, cap;
} buf_t;

typedef struct conn {
    int fd;
    int streaming;  // 1 while its tokens are being ticked out
    int want_out;   // EPOLLOUT armed
    int close_after;
    int active_idx;
    int dead;  // closed in this epoll batch; freed after it (its event may still be in the batch)
    struct conn *next_dead;
    buf_t in;
    buf_t out;
    size_t out_off;
    uint32_t seq;
    int api, tokens, sent, include_usage;
    char id[48];
    char model[72];
#ifdef TICK_H2
    /* HTTP/2: a connection has `session`; each of its streams is a conn_t of its own with
     * fd -1, `parent` its connection, `out` the body bytes nghttp2 has not taken yet and
     * `eof` once the body is complete. */
    nghttp2_session *session;
    struct conn *parent;
    int32_t stream_id;
    int eof;
    struct conn *next_stream, *prev_stream;  // the connection's open streams
    char method[16], path[256];              // the request's pseudo-headers
    int dirty;  // the connection has frames to write after this tick
    struct conn *next_dirty;
    int64_t flushed_at;  // now_ns() after the connection's last write
#endif
} conn_t;

static volatile sig_atomic_t stop_flag = 0;
static void on_signal(int s) { (void)s; stop_flag = 1; }

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void buf_reserve(buf_t *b, size_t extra) {
    if (b->len + extra <= b->cap) return;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + extra) cap *= 2;
    b->p = realloc(b->p, cap);
    if (!b->p) { perror("realloc"); exit(3); }
    b->cap = cap;
}
static void buf_add(buf_t *b, const char *s, size_t n) {
    buf_reserve(b, n);
    memcpy(b->p + b->len, s, n);
    b->len += n;
}
/* One HTTP/1.1 chunk holding `n` bytes of `s`. */
static void add_chunk(buf_t *b, const char *s, size_t n) {
    char h[24];
    int k = snprintf(h, sizeof h, "%zx\r\n", n);
    buf_add(b, h, (size_t)k);
    buf_add(b, s, n);
    buf_add(b, "\r\n", 2);
}

/* Body bytes of a streamed response: an HTTP/1.1 chunk, or an HTTP/2 stream's next bytes. */
static void emit(conn_t *c, const char *s, size_t n) {
#ifdef TICK_H2
    if (c->parent) {
        buf_add(&c->out, s, n);
        return;
    }
#endif
    add_chunk(&c->out, s, n);
}

/* ---- server state ---- */
static int epfd, lfd, tfd;
static int64_t interval_ns, t_start;
static int default_tokens = 100;
static const char *token_text = " the";
static conn_t **active;
static int n_active, cap_active;
static uint32_t next_seq = 1;
static FILE *f_tokens, *f_requests, *f_ticks;
static uint64_t deferred_tokens, total_tokens;
static char anth_delta[256];
static size_t anth_delta_len;

static void set_out(conn_t *c, int on) {
    if (c->want_out == on) return;
    struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_out = on;
}

static void active_remove(conn_t *c) {
    if (c->active_idx < 0) return;
    conn_t *last = active[--n_active];
    active[c->active_idx] = last;
    last->active_idx = c->active_idx;
    c->active_idx = -1;
    c->streaming = 0;
}

static conn_t *graveyard;

static void h2_end(conn_t *c);

static void conn_close(conn_t *c) {
    if (c->dead) return;
    h2_end(c);
    active_remove(c);
    epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->dead = 1;
    c->next_dead = graveyard;
    graveyard = c;
}

static void bury(void) {
    while (graveyard) {
        conn_t *c = graveyard;
        graveyard = c->next_dead;
        free(c->in.p);
        free(c->out.p);
        free(c);
    }
}

/* Send what is queued; 0 ok (maybe partial, EPOLLOUT armed), -1 the connection is gone. */
static int flush_out(conn_t *c) {
    while (c->out_off < c->out.len) {
        ssize_t n = send(c->fd, c->out.p + c->out_off, c->out.len - c->out_off, MSG_NOSIGNAL);
        if (n > 0) {
            c->out_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            set_out(c, 1);
            return 0;
        }
        return -1;
    }
    c->out.len = c->out_off = 0;
    set_out(c, 0);
    if (c->close_after && !c->streaming) return -1;
    return 0;
}

/* A case-insensitive search for a header's value in the head [p, p+n); copies it to dst. */
static int header_value(const char *p, size_t n, const char *name, char *dst, size_t cap) {
    size_t nl = strlen(name);
    const char *end = p + n;
    const char *line = memchr(p, '\n', n);  // skip the request line
    while (line && line + 1 < end) {
        line++;
        if ((size_t)(end - line) > nl + 1 && strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
            const char *v = line + nl + 1;
            while (v < end && (*v == ' ' || *v == '\t')) v++;
            const char *e = v;
            while (e < end && *e != '\r' && *e != '\n') e++;
            size_t k = (size_t)(e - v);
            if (k >= cap) k = cap - 1;
            memcpy(dst, v, k);
            dst[k] = 0;
            return 1;
        }
        line = memchr(line, '\n', (size_t)(end - line));
    }
    return 0;
}

/* The value after "key" and its colon in a JSON body (no nesting awareness; enough here). */
static const char *json_after(const char *body, size_t n, const char *key) {
    size_t kl = strlen(key);
    const char *end = body + n;
    for (const char *p = body; p + kl <= end; p++) {
        p = memmem(p, (size_t)(end - p), key, kl);
        if (!p) return NULL;
        const char *q = p + kl;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')) q++;
        if (q < end && *q == ':') {
            q++;
            while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')) q++;
            return q < end ? q : NULL;
        }
    }
    return NULL;
}

#ifdef TICK_H2
static int h2_submit(conn_t *st, int status, const char *ctype, const char *xid);
#endif

static void respond_simple(conn_t *c, int status, const char *reason, const char *body) {
    char h[256];
    size_t bl = strlen(body);
#ifdef TICK_H2
    if (c->parent) {
        buf_add(&c->out, body, bl);
        c->eof = 1;
        h2_submit(c, status, "application/json", NULL);
        return;
    }
#endif
    int k = snprintf(h, sizeof h,
                     "HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %zu\r\n%s\r\n",
                     status, reason, bl, c->close_after ? "connection: close\r\n" : "");
    buf_add(&c->out, h, (size_t)k);
    buf_add(&c->out, body, bl);
}

static void log_request(conn_t *c, int64_t t_recv, int64_t t_head, const char *xid) {
    fprintf(f_requests, "%u,%s,%s,%d,%lld,%lld\n", c->seq, xid,
            c->api == API_ANTHROPIC ? "anthropic" : "openai", c->tokens, (long long)t_recv,
            (long long)t_head);
}

static void openai_chunk(conn_t *c, const char *delta, const char *finish) {
    char s[768];
    int k = snprintf(s, sizeof s,
                     "data: {\"id\":\"%s\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,"
                     "\"model\":\"%s\",\"system_fingerprint\":null,\"choices\":[{\"index\":0,"
                     "\"delta\":%s,\"logprobs\":null,\"finish_reason\":%s}]%s}\n\n",
                     c->id, c->model, delta, finish, c->include_usage ? ",\"usage\":null" : "");
    emit(c, s, (size_t)k);
}

/* The request in c->in is complete (head_len bytes of head, body_len of body). */
static int handle_request(conn_t *c, size_t head_len, size_t body_len) {
    int64_t t_recv = now_ns();
    const char *p = c->in.p;
    char xid[64] = "-", conn_hdr[32] = "";
    header_value(p, head_len, "x-request-id", xid, sizeof xid);
    for (char *q = xid; *q; q++)
        if (*q == ',' || *q == '\n') *q = '_';
    if (header_value(p, head_len, "connection", conn_hdr, sizeof conn_hdr) &&
        strncasecmp(conn_hdr, "close", 5) == 0)
        c->close_after = 1;
    int is_post = strncmp(p, "POST ", 5) == 0;
    const char *path = strchr(p, ' ');
    path = path ? path + 1 : p;
    const char *body = p + head_len;
    int api = 0;
    if (is_post && strncmp(path, "/v1/messages", 12) == 0 && (path[12] == ' ' || path[12] == '?'))
        api = API_ANTHROPIC;
    else if (is_post && strncmp(path, "/v1/chat/completions", 20) == 0)
        api = API_OPENAI;
    if (!api) {
        if (strncmp(p, "GET /v1/models", 14) == 0)
            respond_simple(c, 200, "OK",
                           "{\"object\":\"list\",\"data\":[{\"id\":\"mock\",\"object\":\"model\","
                           "\"created\":0,\"owned_by\":\"tickserver\"}]}");
        else if (strncmp(p, "GET /health", 11) == 0)
            respond_simple(c, 200, "OK", "{}");
        else
            respond_simple(c, 404, "Not Found",
                           "{\"error\":{\"type\":\"not_found_error\",\"message\":\"no such route\"}}");
        return 0;
    }
    c->api = api;
    c->seq = next_seq++;
    c->tokens = default_tokens;
    const char *v = json_after(body, body_len, "\"max_completion_tokens\"");
    if (!v) v = json_after(body, body_len, "\"max_tokens\"");
    if (v && *v >= '0' && *v <= '9') {
        long t = strtol(v, NULL, 10);
        if (t >= 1 && t <= 1000000) c->tokens = (int)t;
    }
    v = json_after(body, body_len, "\"stream\"");
    int stream = v && *v == 't';
    v = json_after(body, body_len, "\"include_usage\"");
    c->include_usage = v && *v == 't';
    snprintf(c->model, sizeof c->model, "mock");
    v = json_after(body, body_len, "\"model\"");
    if (v && *v == '"') {
        const char *e = memchr(v + 1, '"', (size_t)(body + body_len - v - 1));
        if (e && e - v - 1 < (long)sizeof c->model && !memchr(v + 1, '\\', (size_t)(e - v - 1))) {
            memcpy(c->model, v + 1, (size_t)(e - v - 1));
            c->model[e - v - 1] = 0;
        }
    }
    snprintf(c->id, sizeof c->id, "%s%u", api == API_ANTHROPIC ? "msg_" : "chatcmpl-", c->seq);
    if (!stream) {  // a JSON body at once, no ticks
        buf_t text = {0};
        for (int i = 0; i < c->tokens; i++) buf_add(&text, token_text, strlen(token_text));
        buf_add(&text, "", 1);
        buf_t b = {0};
        buf_reserve(&b, text.len + 1024);
        int k;
        if (api == API_ANTHROPIC)
            k = snprintf(b.p, b.cap,
                         "{\"id\":\"%s\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"%s\","
                         "\"content\":[{\"type\":\"text\",\"text\":\"%s\"}],\"stop_reason\":\"max_tokens\","
                         "\"stop_sequence\":null,\"usage\":{\"input_tokens\":16,\"output_tokens\":%d}}",
                         c->id, c->model, text.p, c->tokens);
        else
            k = snprintf(b.p, b.cap,
                         "{\"id\":\"%s\",\"object\":\"chat.completion\",\"created\":1700000000,"
                         "\"model\":\"%s\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
                         "\"content\":\"%s\"},\"logprobs\":null,\"finish_reason\":\"length\"}],"
                         "\"usage\":{\"prompt_tokens\":16,\"completion_tokens\":%d,\"total_tokens\":%d}}",
                         c->id, c->model, text.p, c->tokens, c->tokens + 16);
        respond_simple(c, 200, "OK", b.p);
        (void)k;
        free(text.p);
        free(b.p);
        log_request(c, t_recv, now_ns(), xid);
        return 0;
    }
    char h[256];
    int k;
#ifdef TICK_H2
    if (c->parent)
        h2_submit(c, 200, "text/event-stream", xid);  // its body: what emit() adds from now on
    else
#endif
    {
        k = snprintf(h, sizeof h,
                     "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
                     "x-request-id: %s\r\ntransfer-encoding: chunked\r\n%s\r\n",
                     xid, c->close_after ? "connection: close\r\n" : "");
        buf_add(&c->out, h, (size_t)k);
    }
    if (api == API_ANTHROPIC) {
        char s[1024];
        k = snprintf(s, sizeof s,
                     "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"%s\","
                     "\"type\":\"message\",\"role\":\"assistant\",\"model\":\"%s\",\"content\":[],"
                     "\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":16,"
                     "\"output_tokens\":0,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0}}}\n\n"
                     "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
                     "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
                     "event: ping\ndata: {\"type\":\"ping\"}\n\n",
                     c->id, c->model);
        emit(c, s, (size_t)k);
    }
    c->sent = 0;
    c->streaming = 1;
    if (n_active == cap_active) {
        cap_active = cap_active ? cap_active * 2 : 1024;
        active = realloc(active, sizeof *active * (size_t)cap_active);
    }
    c->active_idx = n_active;
    active[n_active++] = c;
    int64_t t_head = now_ns();
    log_request(c, t_recv, t_head, xid);
    return 0;
}

#ifdef TICK_H2
static int h2_try(conn_t *c);
#endif

/* Parse as many complete requests as c->in holds (a client does not pipeline while a
 * stream is open; bytes that arrive then wait in c->in until it ends). */
static int try_requests(conn_t *c) {
#ifdef TICK_H2
    int h2 = h2_try(c);
    if (h2) return h2 < 0 ? -1 : 0;
#endif
    while (!c->streaming && c->in.len > 0) {
        char *end = memmem(c->in.p, c->in.len, "\r\n\r\n", 4);
        if (!end) return c->in.len > 65536 ? -1 : 0;
        size_t head_len = (size_t)(end - c->in.p) + 4;
        char cl[32] = "0";
        header_value(c->in.p, head_len, "content-length", cl, sizeof cl);
        long body_len = strtol(cl, NULL, 10);
        if (body_len < 0 || body_len > MAX_IN) return -1;
        if (c->in.len < head_len + (size_t)body_len) return 0;
        if (handle_request(c, head_len, (size_t)body_len) < 0) return -1;
        size_t used = head_len + (size_t)body_len;
        memmove(c->in.p, c->in.p + used, c->in.len - used);
        c->in.len -= used;
        if (flush_out(c) < 0) return -1;
    }
    return 0;
}

static void on_readable(conn_t *c) {
    for (int i = 0; i < 64; i++) {
        buf_reserve(&c->in, 16384);
        ssize_t n = recv(c->fd, c->in.p + c->in.len, c->in.cap - c->in.len, 0);
        if (n > 0) {
            c->in.len += (size_t)n;
            if (c->in.len > MAX_IN + 65536) { conn_close(c); return; }
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        conn_close(c);  // EOF or error
        return;
    }
    if (try_requests(c) < 0) conn_close(c);
}

typedef struct {
    uint32_t seq, idx;
    int64_t t;
} tokrec_t;

/* ---- HTTP/2 (h2c with prior knowledge), on nghttp2 ----
 * A connection whose first bytes are the HTTP/2 client preface gets an nghttp2 server
 * session. Each request stream becomes a conn_t of its own (fd -1, `parent` the connection)
 * that handle_request() and on_tick() treat as an HTTP/1.1 connection's request, with emit()
 * putting body bytes in the stream's `out`, from which nghttp2 takes DATA frames. On a tick
 * every stream's token is added first, then each connection's frames go out in one write,
 * and its tokens are stamped after that write returns. */
#ifdef TICK_H2
#define H2_MAX_STREAMS 128  // as nginx's http2_max_concurrent_streams: 250 streams take 2 connections
static const char H2_PREFACE[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
static conn_t *dirty_conns;
static struct {
    tokrec_t rec;
    conn_t *conn;
} *pending_tokens;
static size_t n_pending, cap_pending;

static ssize_t h2_read(nghttp2_session *session, int32_t stream_id, uint8_t *dst, size_t len,
                       uint32_t *flags, nghttp2_data_source *source, void *user_data) {
    (void)session, (void)stream_id, (void)user_data;
    conn_t *st = source->ptr;
    size_t avail = st->out.len - st->out_off;
    if (avail == 0 && !st->eof) return NGHTTP2_ERR_DEFERRED;
    size_t n = avail < len ? avail : len;
    memcpy(dst, st->out.p + st->out_off, n);
    st->out_off += n;
    if (st->out_off == st->out.len) {
        st->out.len = st->out_off = 0;
        if (st->eof) *flags |= NGHTTP2_DATA_FLAG_EOF;
    }
    return (ssize_t)n;
}

static int h2_submit(conn_t *st, int status, const char *ctype, const char *xid) {
    char code[8];
    snprintf(code, sizeof code, "%d", status);
    nghttp2_nv nva[4];
    size_t n = 0;
#define NV(NAME, VALUE) \
    nva[n++] = (nghttp2_nv){(uint8_t *)(NAME), (uint8_t *)(VALUE), strlen(NAME), strlen(VALUE), NGHTTP2_NV_FLAG_NONE}
    NV(":status", code);
    NV("content-type", ctype);
    if (xid) {
        NV("cache-control", "no-cache");
        NV("x-request-id", xid);
    }
#undef NV
    nghttp2_data_provider prd = {.source = {.ptr = st}, .read_callback = h2_read};
    return nghttp2_submit_response(st->parent->session, st->stream_id, nva, n, &prd);
}

/* The stream has bytes for nghttp2 again: its connection writes after this tick. */
static void h2_resume(conn_t *st) {
    conn_t *c = st->parent;
    nghttp2_session_resume_data(c->session, st->stream_id);
    if (!c->dirty) {
        c->dirty = 1;
        c->next_dirty = dirty_conns;
        dirty_conns = c;
    }
}

static void h2_pending_token(conn_t *c, uint32_t seq, uint32_t idx) {
    if (n_pending == cap_pending) {
        cap_pending = cap_pending ? cap_pending * 2 : 1024;
        pending_tokens = realloc(pending_tokens, sizeof *pending_tokens * cap_pending);
        if (!pending_tokens) { perror("realloc"); exit(3); }
    }
    pending_tokens[n_pending].rec = (tokrec_t){seq, idx, 0};
    pending_tokens[n_pending++].conn = c;
}

static void stream_free(conn_t *st) {
    active_remove(st);
    conn_t *c = st->parent;
    if (st->prev_stream) st->prev_stream->next_stream = st->next_stream;
    else c->next_stream = st->next_stream;
    if (st->next_stream) st->next_stream->prev_stream = st->prev_stream;
    free(st->in.p);
    free(st->out.p);
    free(st);
}

/* What nghttp2 has to send goes out; 0 ok, -1 the connection is done with. */
static int h2_flush(conn_t *c) {
    int r = flush_out(c);
    // Frames are gathered into one write (mem_send hands them out a few at a time), up to
    // 64 KiB; more only once the socket took all of that, so a client that reads slowly
    // leaves its tokens in the streams' buffers, where the next tick sees them `deferred`.
    while (r == 0 && c->out_off >= c->out.len) {
        const uint8_t *data;
        ssize_t n = 0;
        while (c->out.len < 65536 && (n = nghttp2_session_mem_send(c->session, &data)) > 0)
            buf_add(&c->out, (const char *)data, (size_t)n);
        if (n < 0) r = -1;
        if (r < 0 || c->out.len == 0) break;
        r = flush_out(c);
    }
    c->flushed_at = now_ns();
    if (r == 0 && !nghttp2_session_want_read(c->session) && !nghttp2_session_want_write(c->session))
        r = -1;
    return r;
}

static void h2_flush_tick(void) {
    while (dirty_conns) {
        conn_t *c = dirty_conns;
        dirty_conns = c->next_dirty;
        c->dirty = 0;
        if (!c->dead && h2_flush(c) < 0) conn_close(c);
    }
    for (size_t i = 0; i < n_pending; i++) {
        pending_tokens[i].rec.t = pending_tokens[i].conn->flushed_at;
        fwrite(&pending_tokens[i].rec, sizeof(tokrec_t), 1, f_tokens);
    }
    n_pending = 0;
}

static conn_t *h2_stream(nghttp2_session *session, int32_t stream_id) {
    return nghttp2_session_get_stream_user_data(session, stream_id);
}

static int h2_on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *ud) {
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    conn_t *c = ud, *st = calloc(1, sizeof *st);
    st->fd = -1;
    st->active_idx = -1;
    st->parent = c;
    st->stream_id = frame->hd.stream_id;
    st->next_stream = c->next_stream;
    if (c->next_stream) c->next_stream->prev_stream = st;
    c->next_stream = st;
    nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, st);
    return 0;
}

static int h2_on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                        size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud) {
    (void)flags, (void)ud;
    conn_t *st = h2_stream(session, frame->hd.stream_id);
    if (!st) return 0;
    if (namelen == 7 && memcmp(name, ":method", 7) == 0) {
        snprintf(st->method, sizeof st->method, "%.*s", (int)valuelen, (const char *)value);
    } else if (namelen == 5 && memcmp(name, ":path", 5) == 0) {
        snprintf(st->path, sizeof st->path, "%.*s", (int)valuelen, (const char *)value);
    } else if (namelen && name[0] != ':') {  // the head as HTTP/1.1 would have it
        buf_add(&st->in, (const char *)name, namelen);
        buf_add(&st->in, ": ", 2);
        buf_add(&st->in, (const char *)value, valuelen);
        buf_add(&st->in, "\r\n", 2);
    }
    return 0;
}

static int h2_on_data(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                      const uint8_t *data, size_t len, void *ud) {
    (void)flags, (void)ud;
    conn_t *st = h2_stream(session, stream_id);
    if (!st) return 0;
    if (st->out.len + len > MAX_IN) return NGHTTP2_ERR_CALLBACK_FAILURE;
    buf_add(&st->out, (const char *)data, len);  // the body, until the request is complete
    return 0;
}

/* The request is complete: build its HTTP/1.1 form and answer it as one. */
static int h2_on_frame(nghttp2_session *session, const nghttp2_frame *frame, void *ud) {
    (void)ud;
    if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
        !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    conn_t *st = h2_stream(session, frame->hd.stream_id);
    if (!st) return 0;
    buf_t req = {0};
    char line[300];
    int k = snprintf(line, sizeof line, "%s %s HTTP/1.1\r\n", st->method, st->path);
    buf_add(&req, line, (size_t)k);
    if (st->in.len) buf_add(&req, st->in.p, st->in.len);
    buf_add(&req, "\r\n", 2);
    size_t head_len = req.len, body_len = st->out.len;
    if (body_len) buf_add(&req, st->out.p, body_len);
    free(st->in.p);
    st->in = req;
    st->out.len = 0;
    return handle_request(st, head_len, body_len) < 0 ? NGHTTP2_ERR_CALLBACK_FAILURE : 0;
}

static int h2_on_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code, void *ud) {
    (void)error_code, (void)ud;
    conn_t *st = h2_stream(session, stream_id);
    if (st) {
        nghttp2_session_set_stream_user_data(session, stream_id, NULL);
        stream_free(st);
    }
    return 0;
}

static int h2_start(conn_t *c) {
    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, h2_on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, h2_on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, h2_on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, h2_on_frame);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, h2_on_close);
    int r = nghttp2_session_server_new(&c->session, cb, c);
    nghttp2_session_callbacks_del(cb);
    if (r) return -1;
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, H2_MAX_STREAMS}};
    return nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, iv, 1) ? -1 : 0;
}

/* 1: the connection speaks HTTP/2 (its bytes are handled, or its preface is incomplete),
 * 0: it speaks HTTP/1.1, -1: it is done with. */
static int h2_try(conn_t *c) {
    if (!c->session) {
        size_t n = c->in.len < 24 ? c->in.len : 24;
        if (n == 0 || memcmp(c->in.p, H2_PREFACE, n) != 0) return 0;
        if (n < 24) return 1;
        if (h2_start(c) < 0) return -1;
    }
    ssize_t used = nghttp2_session_mem_recv(c->session, (const uint8_t *)c->in.p, c->in.len);
    c->in.len = 0;
    if (used < 0) return -1;
    return h2_flush(c) < 0 ? -1 : 1;
}

static void h2_end(conn_t *c) {
    if (!c->session) return;
    while (c->next_stream) stream_free(c->next_stream);
    nghttp2_session_del(c->session);  // frees its streams' state without callbacks
    c->session = NULL;
}
#else
static void h2_end(conn_t *c) { (void)c; }
#endif

static void on_tick(void) {
    uint64_t expirations = 0;
    if (read(tfd, &expirations, sizeof expirations) != sizeof expirations) return;
    static int64_t k = 0;  // ticks handled
    int64_t t0 = now_ns();
    int64_t deadline = t_start + (k + 1) * interval_ns;  // the first one due, missed or not
    k += (int64_t)expirations;
    int written = 0;
    // Iterate over a snapshot: finished streams leave `active` (swap-removal) as we go.
    for (int i = 0; i < n_active;) {
        conn_t *c = active[i];
        int deferred = c->out_off < c->out.len;
#ifdef TICK_H2
        if (c->parent) deferred |= c->parent->out_off < c->parent->out.len;
#endif
        c->sent++;
        if (c->api == API_ANTHROPIC) {
            emit(c, anth_delta, anth_delta_len);
        } else {
            char delta[160];
            if (c->sent == 1)  // the role chunk with the first token, as vLLM writes it
                openai_chunk(c, "{\"role\":\"assistant\",\"content\":\"\"}", "null");
            snprintf(delta, sizeof delta, "{\"content\":\"%s\"}", token_text);
            openai_chunk(c, delta, "null");
        }
        int last = c->sent >= c->tokens;
        if (last) {
            if (c->api == API_ANTHROPIC) {
                char s[768];
                int n = snprintf(s, sizeof s,
                                 "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
                                 "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":"
                                 "{\"stop_reason\":\"max_tokens\",\"stop_sequence\":null},\"usage\":"
                                 "{\"input_tokens\":16,\"output_tokens\":%d,\"cache_creation_input_tokens\":0,"
                                 "\"cache_read_input_tokens\":0}}\n\n"
                                 "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
                                 c->tokens);
                emit(c, s, (size_t)n);
            } else {
                openai_chunk(c, "{}", "\"length\"");
                if (c->include_usage) {
                    char s[512];
                    int n = snprintf(s, sizeof s,
                                     "data: {\"id\":\"%s\",\"object\":\"chat.completion.chunk\","
                                     "\"created\":1700000000,\"model\":\"%s\",\"system_fingerprint\":null,"
                                     "\"choices\":[],\"usage\":{\"prompt_tokens\":16,\"completion_tokens\":%d,"
                                     "\"total_tokens\":%d,\"prompt_tokens_details\":{\"cached_tokens\":0}}}\n\n",
                                     c->id, c->model, c->tokens, c->tokens + 16);
                    emit(c, s, (size_t)n);
                }
                emit(c, "data: [DONE]\n\n", 14);
            }
#ifdef TICK_H2
            if (c->parent)
                c->eof = 1;
            else
#endif
                buf_add(&c->out, "0\r\n\r\n", 5);
            active_remove(c);  // active[i] is now another stream: do not advance i
        }
#ifdef TICK_H2
        if (c->parent) {  // its frames go out with the connection's, after this loop
            h2_resume(c);
            if (!last) i++;
            h2_pending_token(c->parent, c->seq, (uint32_t)(c->sent - 1) | ((uint32_t)deferred << 31));
            total_tokens++;
            deferred_tokens += (uint64_t)deferred;
            written++;
            continue;
        }
#endif
        int gone = flush_out(c) < 0;
        if (!last && !gone) i++;  // (a gone one leaves active[i] below: stay at i)
        tokrec_t r = {c->seq, (uint32_t)(c->sent - 1) | ((uint32_t)deferred << 31), now_ns()};
        fwrite(&r, sizeof r, 1, f_tokens);
        total_tokens++;
        deferred_tokens += (uint64_t)deferred;
        written++;
        if (gone) {
            conn_close(c);
            continue;
        }
        if (last && c->in.len > 0 && try_requests(c) < 0) conn_close(c);
    }
#ifdef TICK_H2
    h2_flush_tick();
#endif
    int64_t t1 = now_ns();
    int64_t rec[4] = {deadline, t0 - deadline, t1 - t0, written};
    fwrite(rec, sizeof rec, 1, f_ticks);
}

static int listen_on(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 4096) < 0) {
        perror("bind/listen");
        exit(2);
    }
    return fd;
}

static int serve(int argc, char **argv) {
    if (argc < 6) return 64;
    int port = atoi(argv[2]);
    interval_ns = atoll(argv[3]) * 1000LL;
    default_tokens = atoi(argv[4]);
    const char *prefix = argv[5];
    double max_s = argc > 6 ? atof(argv[6]) : 3600.0;
    if (argc > 7) token_text = argv[7];
    anth_delta_len = (size_t)snprintf(
        anth_delta, sizeof anth_delta,
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
        "\"delta\":{\"type\":\"text_delta\",\"text\":\"%s\"}}\n\n",
        token_text);
    char path[4096];
    snprintf(path, sizeof path, "%s.tokens", prefix);
    f_tokens = fopen(path, "wb");
    snprintf(path, sizeof path, "%s.requests", prefix);
    f_requests = fopen(path, "w");
    snprintf(path, sizeof path, "%s.ticks", prefix);
    f_ticks = fopen(path, "wb");
    if (!f_tokens || !f_requests || !f_ticks) { perror("log files"); return 2; }
    setvbuf(f_tokens, NULL, _IOFBF, 1 << 22);
    setvbuf(f_ticks, NULL, _IOFBF, 1 << 20);
    setvbuf(f_requests, NULL, _IOFBF, 1 << 20);
    fprintf(f_requests, "seq,x_request_id,api,tokens,t_recv_ns,t_head_ns\n");

    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    epfd = epoll_create1(0);
    lfd = listen_on(port);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &lfd};
    epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev);
    tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
    t_start = now_ns();
    struct itimerspec its = {
        .it_interval = {interval_ns / 1000000000LL, interval_ns % 1000000000LL},
        .it_value = {(t_start + interval_ns) / 1000000000LL, (t_start + interval_ns) % 1000000000LL},
    };
    timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
    ev.events = EPOLLIN;
    ev.data.ptr = &tfd;
    epoll_ctl(epfd, EPOLL_CTL_ADD, tfd, &ev);
    printf("listening %d\n", port);
    fflush(stdout);

    int64_t t_stop = t_start + (int64_t)(max_s * 1e9);
    struct epoll_event evs[512];
    while (!stop_flag && now_ns() < t_stop) {
        int n = epoll_wait(epfd, evs, 512, 200);
        if (n < 0) {
            if (errno == EINTR) continue;
            perror("epoll_wait");
            break;
        }
        for (int i = 0; i < n; i++)  // the tick first: it is what is measured
            if (evs[i].data.ptr == &tfd) on_tick();
        for (int i = 0; i < n; i++) {
            void *ptr = evs[i].data.ptr;
            if (ptr == &tfd) continue;
            if (ptr == &lfd) {
                for (int j = 0; j < 1024; j++) {
                    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
                    if (fd < 0) break;
                    int one = 1;
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    conn_t *c = calloc(1, sizeof *c);
                    c->fd = fd;
                    c->active_idx = -1;
                    struct epoll_event cev = {.events = EPOLLIN, .data.ptr = c};
                    epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &cev);
                }
                continue;
            }
            conn_t *c = ptr;
            if (c->dead) continue;  // closed by the tick earlier in this batch
            if (evs[i].events & EPOLLOUT) {
                int r = flush_out(c);
#ifdef TICK_H2
                if (r == 0 && c->session && c->out_off >= c->out.len) r = h2_flush(c);
#endif
                if (r < 0) { conn_close(c); continue; }
                if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) on_readable(c);
            } else if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                on_readable(c);
            }
        }
        bury();
    }
    fflush(f_tokens);
    fclose(f_tokens);
    fclose(f_requests);
    fclose(f_ticks);
    fprintf(stderr, "tickserver: %llu tokens written, %llu deferred (client behind)\n",
            (unsigned long long)total_tokens, (unsigned long long)deferred_tokens);
    return 0;
}

/* ---- sink: a closed-loop C client, to measure the server without a Python client ---- */
typedef struct {
    int fd;
    char tail[5];
    uint64_t responses;
} sconn_t;

static int sink(int argc, char **argv) {
    if (argc < 7) return 64;
    int port = atoi(argv[2]), streams = atoi(argv[3]), tokens = atoi(argv[4]);
    double seconds = atof(argv[5]);
    int anthropic = strcmp(argv[6], "anthropic") == 0;
    char body[256], req[1024];
    int bl = snprintf(body, sizeof body,
                      "{\"model\":\"mock\",\"max_tokens\":%d,\"stream\":true,\"stream_options\":"
                      "{\"include_usage\":true},\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
                      tokens);
    int rl = snprintf(req, sizeof req,
                      "POST %s HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                      "content-length: %d\r\n\r\n%s",
                      anthropic ? "/v1/messages" : "/v1/chat/completions", bl, body);
    signal(SIGPIPE, SIG_IGN);
    int ep = epoll_create1(0);
    sconn_t *cs = calloc((size_t)streams, sizeof *cs);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < streams; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) { perror("connect"); return 2; }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fcntl(fd, F_SETFL, O_NONBLOCK);
        cs[i].fd = fd;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &cs[i]};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
        if (send(fd, req, (size_t)rl, MSG_NOSIGNAL) != rl) { perror("send"); return 2; }
    }
    int64_t t_end = now_ns() + (int64_t)(seconds * 1e9);
    uint64_t bytes = 0, responses = 0;
    static char rb[1 << 16];
    struct epoll_event evs[512];
    while (now_ns() < t_end) {
        int n = epoll_wait(ep, evs, 512, 100);
        for (int i = 0; i < n; i++) {
            sconn_t *s = evs[i].data.ptr;
            for (;;) {
                ssize_t k = recv(s->fd, rb, sizeof rb, 0);
                if (k <= 0) break;
                bytes += (uint64_t)k;
                // The end of a chunked response: "0\r\n\r\n" closing a read (no pipelining).
                char last[5];
                if (k >= 5) memcpy(last, rb + k - 5, 5);
                else {
                    memmove(s->tail, s->tail + k, (size_t)(5 - k));
                    memcpy(s->tail + 5 - k, rb, (size_t)k);
                    memcpy(last, s->tail, 5);
                }
                memcpy(s->tail, last, 5);
                if (memcmp(last, "0\r\n\r\n", 5) == 0) {
                    responses++;
                    memset(s->tail, 0, 5);
                    if (send(s->fd, req, (size_t)rl, MSG_NOSIGNAL) != rl) return 2;
                }
            }
        }
    }
    printf("{\"responses\": %llu, \"bytes\": %llu}\n", (unsigned long long)responses,
           (unsigned long long)bytes);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "serve") == 0) return serve(argc, argv);
    if (argc > 1 && strcmp(argv[1], "features") == 0) {  // what this build speaks
#ifdef TICK_H2
        puts("h1 h2c");
#else
        puts("h1");
#endif
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "sink") == 0) return sink(argc, argv);
    fprintf(stderr, "usage: tickserver serve PORT INTERVAL_US TOKENS LOG_PREFIX [MAX_S] [TEXT]\n"
                    "       tickserver sink PORT STREAMS TOKENS SECONDS anthropic|openai\n");
    return 64;
}
