/* web.h: the portal's static files (web/), served by the server at "/" (index.html)
 * and "/web/..." without a token: the pages hold no data, the API calls they make
 * carry the user's token. */
#pragma once

#include "server/http.h"

#include <stdbool.h>

/* The file a request path names under root, or NULL when the path is not one the
 * portal serves ("/" is index.html, "/web/REST" is REST; a segment that is empty or
 * starts with '.' is refused, so ".." never climbs out). Malloc'd. */
char *web_file_path(const char *root, const char *url_path);

/* The content type for a file name, by its extension (application/octet-stream when
 * unknown). A static string. */
const char *web_content_type(const char *name);

/* Reply with the file url_path names under root: 200 with its bytes and type, 404
 * when there is no such regular file (or root is NULL). */
void web_reply(const char *root, const char *url_path, HttpResponse *rp);
