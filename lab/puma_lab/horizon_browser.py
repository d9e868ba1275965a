# SPDX-License-Identifier: Apache-2.0
"""Chromium (headless, under Selenium) reads Puma's panel in Horizon.

Run by puma_lab.horizon.browse in the control namespace with the Horizon
environment's Python: ``python -m puma_lab.horizon_browser JSON``.  It
logs in through Horizon's form, opens the panel, clicks each of its tabs
and prints one JSON line: the page title, per table its rows (the cells'
text), the tabs seen, the screenshots taken and every message the
browser's console logged (level and text).  With ``press`` (table, row
and action), it then presses that row action, confirms Horizon's dialog
and reports the messages the page shows afterwards.
"""

import json
import os
import sys
import tempfile
import time

from selenium.common import exceptions
from selenium import webdriver
from selenium.webdriver.chrome import service as chrome_service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support import ui

WAIT = 120


def driver(arg):
    opts = webdriver.ChromeOptions()
    opts.binary_location = arg['chromium']
    for flag in ('--headless=new', '--no-sandbox', '--disable-gpu',
                 '--disable-dev-shm-usage', '--window-size=1400,1000',
                 # A new profile each time: no session of an earlier run.
                 '--user-data-dir=%s' % tempfile.mkdtemp(dir=arg['home']),
                 '--no-first-run', '--disable-extensions'):
        opts.add_argument(flag)
    opts.set_capability('goog:loggingPrefs', {'browser': 'ALL'})
    service = chrome_service.Service(
        arg['chromedriver'], log_output=os.path.join(arg['home'],
                                                     'chromedriver.log'))
    d = webdriver.Chrome(options=opts, service=service)
    d.set_page_load_timeout(WAIT)
    return d


def shot(d, arg, name, taken):
    path = os.path.join(arg['shots'], '%02d-%s.png' % (len(taken), name))
    d.save_screenshot(path)
    taken.append(path)


def tables(d):
    """{table id: [[cell text, ...] per row]} of the page's data tables."""
    out = {}
    for t in d.find_elements(By.CSS_SELECTOR, 'table[id]'):
        rows = []
        for tr in t.find_elements(By.CSS_SELECTOR, 'tbody tr'):
            # textContent: the tables of tabs not shown have no .text.
            cells = [' '.join(td.get_attribute('textContent').split())
                     for td in tr.find_elements(By.TAG_NAME, 'td')]
            if cells:
                rows.append(cells)
        out[t.get_attribute('id')] = rows
    return out


def press(d, wait, arg, taken):
    """Press ARG['press']'s row action, confirm, return the page's alerts.

    A row's further actions sit in a closed dropdown: the button is
    clicked through the DOM, as Horizon's own handler receives it.
    Danger actions ask for a confirmation in Horizon's modal first.
    """
    p = arg['press']
    button = d.find_element(By.CSS_SELECTOR, 'button[value="%s__%s__%s"]'
                            % (p['table'], p['action'], p['row']))
    danger = 'btn-danger' in button.get_attribute('class')
    page = d.find_element(By.TAG_NAME, 'html')
    d.execute_script('arguments[0].click();', button)
    if danger:
        confirm = wait.until(ec.element_to_be_clickable(
            (By.CSS_SELECTOR, '#modal_wrapper .modal .btn-danger')))
        shot(d, arg, 'confirm', taken)
        confirm.click()
    # The form's POST answers with a redirect to the panel, whose
    # messages Horizon shows as alerts.
    wait.until(ec.staleness_of(page))
    alerts = wait.until(lambda x: x.find_elements(
        By.CSS_SELECTOR, '.messages .alert'))
    shot(d, arg, 'pressed', taken)
    return [' '.join(a.get_attribute('textContent').split())
            for a in alerts]


def main(argv):
    arg = json.loads(argv[1])
    os.makedirs(arg['home'], exist_ok=True)
    result = {'console': [], 'screenshots': [], 'tables': {}, 'tabs': []}
    d = driver(arg)
    wait = ui.WebDriverWait(d, WAIT)
    t0 = time.monotonic()
    try:
        d.get(arg['url'] + '/auth/login/')
        wait.until(ec.presence_of_element_located((By.ID, 'id_username')))
        d.find_element(By.ID, 'id_username').send_keys(arg['user'])
        d.find_element(By.ID, 'id_password').send_keys(arg['password'])
        shot(d, arg, 'login', result['screenshots'])
        d.find_element(By.CSS_SELECTOR, 'form button[type=submit]').click()
        wait.until(lambda x: '/auth/login' not in x.current_url)
        result['after_login'] = d.current_url
        shot(d, arg, 'home', result['screenshots'])
        # Horizon renders the panel's tables on the server: once the
        # page loaded they are there, or the user did not get the panel.
        d.get(arg['url'] + arg['panel'])
        result['panel_url'] = d.current_url
        result['title'] = d.title
        result['heading'] = ' '.join(h.text.strip() for h in
                                     d.find_elements(By.CSS_SELECTOR,
                                                     '.page-header'))
        shot(d, arg, 'panel', result['screenshots'])
        for tab in d.find_elements(By.CSS_SELECTOR,
                                   '.nav-tabs a[data-toggle=tab]'):
            result['tabs'].append(tab.text.strip())
            tab.click()
            time.sleep(0.5)
            shot(d, arg, 'tab-%s' % tab.get_attribute('data-target')
                 .lstrip('#'), result['screenshots'])
        result['tables'] = tables(d)
        if arg.get('press'):
            result['pressed'] = press(d, wait, arg, result['screenshots'])
    except exceptions.WebDriverException as e:
        result['error'] = '%s: %s' % (type(e).__name__, e.msg)
        try:
            result['url'] = d.current_url
            shot(d, arg, 'error', result['screenshots'])
        except exceptions.WebDriverException:
            pass
    finally:
        try:
            result['console'] = [
                {'level': e['level'], 'message': e['message']}
                for e in d.get_log('browser')]
        finally:
            d.quit()
    result['seconds'] = round(time.monotonic() - t0, 1)
    print(json.dumps(result))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
