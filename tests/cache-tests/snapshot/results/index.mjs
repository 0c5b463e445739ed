
export default [
  {
    file: 'chrome.json',
    name: 'Chrome',
    type: 'browser',
    version: '143.0.7499.170'
  },
  {
    file: 'firefox.json',
    name: 'Firefox',
    type: 'browser',
    version: '146.0.1',
    link: 'https://github.com/http-tests/cache-tests/wiki/Firefox'
  },
  {
    file: 'safari.json',
    name: 'Safari',
    type: 'browser',
    version: '26.2 (21623.1.14.11.9)'
  },
  {
    file: 'nginx.json',
    name: 'nginx',
    type: 'rev-proxy',
    version: '1.28.0-6ubuntu1',
    link: 'https://github.com/http-tests/cache-tests/wiki/nginx'
  },
  {
    file: 'squid.json',
    name: 'Squid',
    type: 'rev-proxy',
    version: '6.13-1ubuntu4.1',
    link: 'https://github.com/http-tests/cache-tests/wiki/Squid'
  },
  {
    file: 'trafficserver.json',
    name: 'ATS',
    type: 'rev-proxy',
    version: '9.2.5+ds-1ubuntu2',
    link: 'https://github.com/http-tests/cache-tests/wiki/Traffic-Server'
  },
  {
    file: 'apache.json',
    name: 'httpd',
    type: 'rev-proxy',
    version: '2.4.64-1ubuntu3',
    link: 'https://github.com/http-tests/cache-tests/wiki/Apache-httpd'
  },
  {
    file: 'varnish.json',
    name: 'Varnish',
    type: 'rev-proxy',
    version: '7.7.3-1',
    link: 'https://github.com/http-tests/cache-tests/wiki/Varnish'
  },
  {
    file: 'caddy.json',
    name: 'caddy',
    type: 'rev-proxy',
    version: '0.16.0',
    link: 'https://github.com/http-tests/cache-tests/wiki/Caddy'
  },
  {
    file: 'haproxy.json',
    name: 'HAProxy',
    type: 'rev-proxy',
    version: '3.0.10-1ubuntu3',
    link: 'https://github.com/http-tests/cache-tests/wiki/HAProxy'
  },
  {
    file: 'fastly.json',
    name: 'Fastly',
    type: 'cdn',
    version: '2025-12-29',
    link: 'https://github.com/http-tests/cache-tests/wiki/Fastly'
  }
]
